#pragma once
// The failure trace: when the unexpected interruptions come and what each one
// looks like to the controller. Pure; one trace per seed, shared by every row.

#include <cstdint>
#include <string_view>
#include <vector>

#include "bench/goodput-sim/scenario.h"

namespace trellis::bench {

enum class FaultKind {
  // node evidence
  kDeviceError,  // a rank's log has an Xid
  kNodeLost,     // the node's worker goes silent
  kNcclOneNode,  // a network error on one node's ranks only
  // no node evidence
  kNcclEverywhere,  // NCCL errors on ranks of several nodes
  kSameExit,        // the same exit code on several nodes
  // a rank stops reporting steps
  kHang,
};

enum class FaultGroup { kNodeEvidence, kNoEvidence, kHang };

FaultGroup GroupOf(FaultKind k);
std::string_view FaultKindName(FaultKind k);    // "device_error", ...
std::string_view FaultGroupName(FaultGroup g);  // "node_evidence", "no_evidence", "hang"
// Physics: a node caused it and stays faulty (node evidence and hangs); the
// no-evidence kinds are transient.
bool LeavesNodeFaulty(FaultKind k);

struct TraceEvent {
  int64_t at_ms = 0;  // from the first submission
  FaultKind kind = FaultKind::kDeviceError;
  double culprit_u = 0;  // [0, 1): which of the running launch's nodes it hits
};

// `scenario.interruptions` events in [0, horizon): exponential gaps, scaled so
// that the last gap ends at the horizon (a Poisson process given its count).
std::vector<TraceEvent> MakeTrace(const Scenario& scenario, uint64_t seed);

}  // namespace trellis::bench
