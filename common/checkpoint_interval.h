#pragma once
// checkpoint.every_steps = "auto": how many steps between checkpoints, by
// Young's rule. A checkpoint every T seconds costs the run C/T of its time,
// and a failure (one every M seconds) loses T/2 on average; sqrt(2 x C x M)
// makes the sum smallest (docs/architecture.md, "Checkpoints as often as they
// pay"). Pure and torch-free: the trainer chooses with it on figures its ranks
// agree on; the controller explains the choice with it.

#include <cstdint>
#include <string>

namespace trellis {

struct CheckpointIntervalInput {
  double cost_s = 0;   // what a checkpoint costs the steps (the slowest rank's)
  double step_s = 0;   // seconds per step (the slowest rank's mean)
  double mtbf_s = 0;   // mean time between failures of the run's nodes together
  double min_s = 60;   // checkpoint.auto_min_s
  double max_s = 14400;  // checkpoint.auto_max_s
};

struct CheckpointInterval {
  enum class Bound { kNone, kMin, kMax };
  int64_t steps = 1;     // at least 1
  double young_s = 0;    // sqrt(2 x cost_s x mtbf_s)
  double period_s = 0;   // young_s within [min_s, max_s]
  Bound bound = Bound::kNone;
};

CheckpointInterval ChooseCheckpointInterval(const CheckpointIntervalInput& in);

// The steps before a launch's first checkpoint, before any has been measured:
// the shortest period "auto" would choose (min_s), at `step_s` a step.
int64_t FirstAutoCheckpointSteps(double step_s, double min_s);

// "every 60 steps (6.0 s at 0.1 s a step): sqrt(2 x 0.02 s a checkpoint x 15 min
// between failures) = 6.0 s", with the bound that moved it, if any.
std::string DescribeCheckpointInterval(const CheckpointIntervalInput& in,
                                       const CheckpointInterval& out);

// A node's mean time between failures before this controller has seen any:
// 1 in 5,000 node-hours, about what Llama 3's 54 days on 2,048 nodes of 8
// GPUs saw (419 interruptions, one per 6,300 node-hours).
inline constexpr double kDefaultNodeMtbfHours = 5000;

}  // namespace trellis
