#pragma once
// Straggler detection over the ranks' step times (pure, in memory; fed from
// the step records of docs/architecture.md, "A run's life, as implemented").
//
// A step is complete once every rank reported it. Over the last K complete
// steps, a rank's step is slow when its step_s > F * the median step_s of the
// OTHER ranks at that step (the median of the others, so one straggler does
// not move its own yardstick). A rank with at least M slow steps in the window
// raises one event; it raises another only after it has dropped below M (one
// event per episode), which ends the episode (an end, TakeEnds). Slowness is
// judged once per step, when it completes. A window starts empty, so after a
// controller restart a rank whose episode had not ended is held
// (HoldEpisode): its episode may still run, and it raises nothing until a
// whole window of K steps has seen it below M.
//
// Memory is O(world * K): at most K complete steps, and incomplete steps only
// within K of the newest step seen (older ones, missing a record, are dropped).
// A record older than the window, or for a step already complete, is ignored.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace trellis::controller {

struct PhaseTimes {  // seconds; 0 = not reported
  double step_s = 0;
  double fwd_s = 0;
  double bwd_s = 0;
  double optim_s = 0;
  double comm_s = 0;
};

// One complete step over the ranks: the slowest rank and its step_s, and the
// median step_s (of the reported, non-zero values). The step took as long as
// its slowest rank: the others wait for it in the step's collectives.
struct StepSpread {
  int64_t step = -1;
  int slowest_rank = -1;  // -1: no rank reported a time
  double slowest_s = 0;
  double median_s = 0;
};
StepSpread SpreadOf(int64_t step, const std::vector<PhaseTimes>& times);

struct StragglerEvent {
  int rank = 0;
  std::string node;
  int slow_steps = 0;
  int window = 0;              // complete steps looked at (at most K)
  double median_others_s = 0;  // over the slow steps, of the others' per-step median
  double rank_s = 0;           // the rank's mean step_s over its slow steps
  PhaseTimes rank_phases;      // medians over the slow steps
  PhaseTimes others_phases;    // medians over the slow steps of the others' medians
};

// A rank's episode is over: it raised an event (or was held) and the window
// now sees it below M (a held rank: a whole window).
struct StragglerEnd {
  int rank = 0;
  std::string node;
  int64_t step = -1;   // the complete step that showed it
  int slow_steps = 0;  // in the window, now below M
  int window = 0;      // complete steps looked at
};

class StragglerWindow {
 public:
  // window: K, min_slow: M (1..K), factor: F (> 1).
  StragglerWindow(int world_size, int window, int min_slow, double factor);

  // The rank raised an event before this window began (a controller
  // restart): its episode goes on until K complete steps have seen it below
  // M, so one slow spell across the restart is one event, not two.
  void HoldEpisode(int rank);
  // Records outside [0, world) or with a negative step are ignored.
  void Add(int rank, const std::string& node, int64_t step, const PhaseTimes& t);
  // The events raised since the last call.
  std::vector<StragglerEvent> TakeEvents();
  // The episodes that ended since the last call.
  std::vector<StragglerEnd> TakeEnds();
  // The newest step completed since the last call, if it is newer than any
  // returned before, with its spread over the ranks.
  std::optional<StepSpread> TakeCompleted();

  int complete_steps() const { return static_cast<int>(complete_.size()); }
  int pending_steps() const { return static_cast<int>(pending_.size()); }

 private:
  struct Pending {
    std::vector<PhaseTimes> times;
    std::vector<bool> have;
    int count = 0;
  };
  struct Complete {
    std::vector<PhaseTimes> times;
    std::vector<double> others_median;  // per rank: the others' median step_s
    std::vector<bool> slow;
  };

  void OnComplete(int64_t step, std::vector<PhaseTimes> times);
  void Evaluate(int64_t step);
  StragglerEvent MakeEvent(int rank) const;

  int world_;
  int window_;
  int min_slow_;
  double factor_;
  int64_t newest_ = -1;
  int64_t newest_complete_ = -1;
  int64_t taken_complete_ = -1;
  std::vector<std::string> nodes_;
  std::vector<int> slow_count_;  // per rank, over complete_
  std::vector<bool> armed_;
  std::vector<bool> held_;  // HoldEpisode: re-armed only by a full window
  std::map<int64_t, Pending> pending_;
  std::map<int64_t, Complete> complete_;
  std::vector<StragglerEvent> events_;
  std::vector<StragglerEnd> ends_;
};

}  // namespace trellis::controller
