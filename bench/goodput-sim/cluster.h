#pragma once
// The partition's nodes and the physics of faulty ones: which nodes Slurm
// allocates, which are faulty, and when a faulty node fails a launch again.
// Pure (randomness comes in as an Rng).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/goodput-sim/rng.h"
#include "bench/goodput-sim/trace.h"

namespace trellis::bench {

class Cluster {
 public:
  explicit Cluster(int nodes);  // node1 .. nodeN

  // `count` nodes uniformly among those not `excluded` (sbatch --exclude),
  // in NaturalLess order; fewer when fewer are eligible.
  std::vector<std::string> Allocate(const std::vector<std::string>& excluded, int count,
                                    Rng& rng) const;

  // A node that caused an interruption at `now` stays faulty until Repair or
  // `repair_at`; one faulty already keeps its first fault.
  void MarkFaulty(const std::string& node, FaultKind kind, int64_t now_ms, int64_t repair_at_ms);
  void Repair(const std::string& node);
  bool IsFaulty(const std::string& node, int64_t now_ms) const;
  int FaultyCount(int64_t now_ms) const;

  struct Repeat {
    int64_t at_ms = 0;
    std::string node;
    FaultKind kind = FaultKind::kDeviceError;
  };
  // For a launch starting at `now` on `running` (NaturalLess order): the first
  // failure one of its faulty nodes causes, each after an exponential time of
  // `mean_s` (memoryless, so drawn at the start), unless repaired before.
  std::optional<Repeat> NextRepeat(const std::vector<std::string>& running, int64_t now_ms,
                                   double mean_s, Rng& rng) const;

 private:
  struct Fault {
    FaultKind kind;
    int64_t repair_at_ms;
  };
  int IndexOf(const std::string& node) const;  // -1 when not "nodeK"
  std::vector<std::string> names_;
  std::map<int, Fault> faulty_;  // by index: a stable order for the draws
};

}  // namespace trellis::bench
