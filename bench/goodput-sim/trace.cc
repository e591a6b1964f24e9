#include "bench/goodput-sim/trace.h"

#include <cmath>

#include "bench/goodput-sim/rng.h"

namespace trellis::bench {

FaultGroup GroupOf(FaultKind k) {
  switch (k) {
    case FaultKind::kDeviceError:
    case FaultKind::kNodeLost:
    case FaultKind::kNcclOneNode: return FaultGroup::kNodeEvidence;
    case FaultKind::kNcclEverywhere:
    case FaultKind::kSameExit: return FaultGroup::kNoEvidence;
    case FaultKind::kHang: return FaultGroup::kHang;
  }
  return FaultGroup::kNoEvidence;
}

std::string_view FaultKindName(FaultKind k) {
  switch (k) {
    case FaultKind::kDeviceError: return "device_error";
    case FaultKind::kNodeLost: return "node_lost";
    case FaultKind::kNcclOneNode: return "nccl_one_node";
    case FaultKind::kNcclEverywhere: return "nccl_everywhere";
    case FaultKind::kSameExit: return "same_exit";
    case FaultKind::kHang: return "hang";
  }
  return "unknown";
}

std::string_view FaultGroupName(FaultGroup g) {
  switch (g) {
    case FaultGroup::kNodeEvidence: return "node_evidence";
    case FaultGroup::kNoEvidence: return "no_evidence";
    case FaultGroup::kHang: return "hang";
  }
  return "unknown";
}

bool LeavesNodeFaulty(FaultKind k) { return GroupOf(k) != FaultGroup::kNoEvidence; }

namespace {

FaultKind DrawKind(const Scenario& s, Rng& rng) {
  double group = rng.Uniform(), within = rng.Uniform();
  if (group < s.share_node_evidence)
    return within < 0.4   ? FaultKind::kDeviceError
           : within < 0.8 ? FaultKind::kNodeLost
                          : FaultKind::kNcclOneNode;
  if (group < s.share_node_evidence + s.share_no_evidence)
    return within < 0.5 ? FaultKind::kNcclEverywhere : FaultKind::kSameExit;
  return FaultKind::kHang;
}

}  // namespace

std::vector<TraceEvent> MakeTrace(const Scenario& s, uint64_t seed) {
  Rng times(seed, /*stream=*/1), kinds(seed, /*stream=*/2);
  std::vector<double> at;  // cumulative exponential gaps, n + 1 of them
  double sum = 0;
  for (int i = 0; i <= s.interruptions; ++i) at.push_back(sum += times.Exponential(1.0));
  std::vector<TraceEvent> out;
  const double horizon_ms = static_cast<double>(s.horizon_s) * 1000.0;
  for (int i = 0; i < s.interruptions; ++i) {
    TraceEvent e;
    e.at_ms = static_cast<int64_t>(std::floor(horizon_ms * at[i] / sum));
    e.kind = DrawKind(s, kinds);
    e.culprit_u = kinds.Uniform();
    out.push_back(e);
  }
  return out;
}

}  // namespace trellis::bench
