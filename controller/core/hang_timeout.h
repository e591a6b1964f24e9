#pragma once
// Learned hang timeouts (pure; docs/architecture.md, "Hangs: learned
// timeouts"). A fixed restart.hang_timeout_s is minutes so that no run's
// slowest step, checkpoint or start-up is taken for a hang; a run of 0.3 s
// steps then hangs for minutes before anyone acts. So the timeout in force
// is learned from what the launch shows:
//   steps:    max(floor, factor x p99 of the gaps between the launch's
//             consecutive steps as the controller first heard of each)
//   + a checkpoint when the rank's next step writes one: 2 x the longest
//             checkpoint seen (a gap whose record carried checkpoint_seconds:
//             the longer of the two); none seen yet: not learned
//   start-up: max(startup floor, startup factor x the longest start (GO to
//             every rank's first step) of the run's earlier launches)
// always at most the spec's value (restart.hang_timeout_s,
// startup_timeout_s), which is also what holds while too little was seen,
// while the workers are stopping the ranks (they may be writing a last
// checkpoint), and with restart.hang_learned = false. Only [model] ranks
// learn (run_health_timeouts.cc): a command's own pauses (an evaluation, a
// wait for something) cannot be foreseen.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trellis::controller {

struct HangTimeoutPolicy {
  double bound_s = 600;          // restart.hang_timeout_s
  double startup_bound_s = 900;  // restart.startup_timeout_s
  bool learned = true;           // restart.hang_learned
  double floor_s = 5;            // restart.hang_floor_s
  double factor = 10;            // restart.hang_factor
  double startup_floor_s = 60;   // restart.startup_floor_s
  double startup_factor = 3;     // restart.startup_factor
  // Why not `learned`, when it is not ("" : none said).
  std::string not_learned_why;
};

// The gaps between a launch's consecutive steps (its ranks step together:
// one gap a step), the newest kKept.
class StepGaps {
 public:
  static constexpr size_t kKept = 256;
  // Fewer step gaps than this: the p99 is not trusted yet.
  static constexpr size_t kMinSeen = 20;

  // `checkpoint_s` > 0: the record that ended the gap says the rank spent
  // that long on a checkpoint after the step; the gap is a checkpoint's then,
  // as long as the longer of the two (records may arrive in batches).
  void Add(double gap_s, double checkpoint_s = 0);
  size_t steps_seen() const { return steps_seen_; }
  // Over the kept step gaps; nullopt below kMinSeen.
  std::optional<double> P99() const;
  std::optional<double> LongestCheckpoint() const { return checkpoint_max_; }

 private:
  std::vector<double> ring_;
  size_t next_ = 0;
  size_t steps_seen_ = 0;
  std::optional<double> checkpoint_max_;
};

struct TimeoutInForce {
  double seconds = 0;
  bool learned = false;
  std::string basis;  // how it was found, for `show` and the hang's evidence
};

// The hang timeout of a rank that reported a step. `checkpoint_next`: a
// checkpoint comes before its next record (nullopt: the rank does not say, so
// any step may). `stopping`: its worker is stopping the ranks or passed a stop on.
TimeoutInForce HangTimeout(const HangTimeoutPolicy& policy, const StepGaps& gaps,
                           std::optional<bool> checkpoint_next, bool stopping);

// Before the first step: from the run's earlier launches' starts.
TimeoutInForce StartupTimeout(const HangTimeoutPolicy& policy,
                              const std::vector<double>& earlier_starts_s);

}  // namespace trellis::controller
