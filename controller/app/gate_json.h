#pragma once
// How the gate's figures and verdicts are kept in the store (JSON text).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/core/decisions.h"
#include "controller/core/gate_policy.h"

namespace trellis::controller {

struct NodeGateView {
  std::string node;
  std::string decision;  // "go", "standby", "fail", "missing"
  std::vector<std::string> reasons;
  double score = 0;
  NodeProbe probe;
};

std::string ProbeToJson(const NodeProbe& probe);
std::string PolicyToJson(const GatePolicy& policy);
std::string NodeGatesToJson(const std::vector<NodeGateView>& nodes);
absl::StatusOr<std::vector<NodeGateView>> NodeGatesFromJson(const std::string& text);

}  // namespace trellis::controller
