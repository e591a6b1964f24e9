#pragma once
// A launch's GO as the store keeps it (LaunchRecord::go_json), and the answer
// it gives a worker that registers again once the gate has decided: after a
// controller restart the GO some nodes already act on stays the launch's GO,
// never a second gate that could start the same ranks elsewhere.

#include <string>

#include "absl/status/statusor.h"
#include "controller/app/views.h"
#include "controller/store/records.h"

namespace trellis::controller {

// The fields every node's GO shares (ranks, master, resume step, checkpoint
// directory); node_index, rank_offset and data_roots are per node or per
// controller, and not kept.
std::string GoToJson(const GateAnswer& go);
absl::StatusOr<GateAnswer> GoFromJson(const std::string& text);

// The answer to `node` registering again for the launch of `row`, decided
// before: GO with its place in the row's rank order, STANDBY for a node the
// GO left out, ABORT once the launch ended or when the row kept no GO (a
// database of schema 5).
GateAnswer AnswerDecidedLaunch(const LaunchRecord& row, const std::string& node);

}  // namespace trellis::controller
