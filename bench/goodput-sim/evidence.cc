#include "bench/goodput-sim/evidence.h"

#include <algorithm>

namespace trellis::bench {

using controller::LaunchEvidence;
using controller::RankEnd;

namespace {

constexpr int kSigTerm = 15;

struct Layout {
  const std::vector<std::string>& go;
  int ranks_per_node;

  int IndexOf(const std::string& node) const {
    auto it = std::find(go.begin(), go.end(), node);
    return it == go.end() ? 0 : static_cast<int>(it - go.begin());
  }
  // The k-th node after `node`, wrapping: its neighbours in the collective.
  const std::string& After(const std::string& node, int k) const {
    return go[(IndexOf(node) + k) % go.size()];
  }
  RankEnd End(const std::string& node, int exit_code, std::vector<std::string> markers,
              std::string line, bool after_stop) const {
    RankEnd r;
    r.node = node;
    r.rank = IndexOf(node) * ranks_per_node;
    r.exit_code = exit_code;
    r.markers = std::move(markers);
    r.evidence_line = std::move(line);
    r.after_stop = after_stop;
    return r;
  }
  // A rank stopped by its worker once the launch was being stopped.
  RankEnd Stopped(const std::string& node) const {
    RankEnd r = End(node, 128 + kSigTerm, {}, "", true);
    r.signal = kSigTerm;
    return r;
  }
};

}  // namespace

LaunchEvidence EvidenceOf(FaultKind kind, const std::string& culprit,
                          const std::vector<std::string>& go_nodes, int ranks_per_node,
                          int64_t last_step, double silent_s) {
  Layout at{go_nodes, ranks_per_node};
  LaunchEvidence e;
  e.step_exit_code = 1;
  e.go_nodes = go_nodes;
  e.reported_nodes = go_nodes;
  const std::string& next = at.After(culprit, 1);
  switch (kind) {
    case FaultKind::kDeviceError:
      e.rank_ends = {
          at.End(culprit, 1, {"device_error"}, "NVRM: Xid 79, GPU has fallen off the bus", false),
          at.End(next, 1, {"nccl_error"}, "NCCL error: remote process exited", true)};
      break;
    case FaultKind::kNodeLost:
      e.lost_nodes = {culprit};
      e.lost_silent_s[culprit] = silent_s;
      e.reported_nodes.erase(std::remove(e.reported_nodes.begin(), e.reported_nodes.end(), culprit),
                             e.reported_nodes.end());
      e.rank_ends = {at.Stopped(next)};
      break;
    case FaultKind::kNcclOneNode:
      e.rank_ends = {at.End(culprit, 1, {"network"}, "NET/IB: Got completion with error 12", false),
                     at.Stopped(next)};
      break;
    case FaultKind::kNcclEverywhere:
      for (int k = 0; k < 3; ++k)
        e.rank_ends.push_back(at.End(at.After(culprit, k), 1, {"nccl_timeout"},
                                     "Watchdog caught collective operation timeout", false));
      break;
    case FaultKind::kSameExit:
      for (int k = 0; k < 3; ++k)
        e.rank_ends.push_back(at.End(at.After(culprit, k), 1, {}, "RuntimeError", false));
      break;
    case FaultKind::kHang: {
      controller::HangEvidence h;
      h.rank = at.IndexOf(culprit) * ranks_per_node;
      h.node = culprit;
      h.last_step = last_step;
      h.silent_s = silent_s;
      e.hang = h;
      e.rank_ends = {at.Stopped(culprit), at.Stopped(next)};
      break;
    }
  }
  // oom_kills stay unknown: the job cgroup's counter is not simulated.
  return e;
}

LaunchEvidence TimeLimitEvidence(const std::vector<std::string>& go_nodes) {
  LaunchEvidence e;
  e.step_exit_code = 128 + kSigTerm;
  e.go_nodes = go_nodes;
  e.reported_nodes = go_nodes;
  e.time_limit = true;
  return e;
}

LaunchEvidence HandoffEvidence(const std::vector<std::string>& go_nodes) {
  LaunchEvidence e;
  e.step_exit_code = 0;
  e.go_nodes = go_nodes;
  e.reported_nodes = go_nodes;
  e.handoff = true;
  return e;
}

}  // namespace trellis::bench
