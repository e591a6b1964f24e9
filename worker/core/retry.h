#pragma once
// Backoff for calls to the controller: exponential, capped, with jitter so
// that the workers of a large allocation do not retry in lockstep. Pure: the
// caller supplies the random draw.

#include <chrono>
#include <string>
#include <vector>

namespace trellis::worker {

struct BackoffPolicy {
  std::chrono::milliseconds initial{250};
  std::chrono::milliseconds max{10000};
  double multiplier = 2.0;
  double jitter = 0.2;  // the delay varies by +-jitter
};

// Delay before retry number `retry` (0 for the first retry); unit_random in [0, 1).
std::chrono::milliseconds BackoffDelay(const BackoffPolicy& policy, int retry, double unit_random);

// The batch script's question (NextLaunchRequest, see proto/trellis/v1/agent.proto).
struct NextLaunchAsk {
  int step_exit_code = 0;
  int requeue_count = 0;
  std::string allocation_nodelist;
  bool terminated_by_slurm = false;
  bool time_limit_warned = false;
};

// What the batch script reads after a launch (one line, see FormatNextLaunchLine).
struct NextLaunchChoice {
  struct OtherJob {
    std::string job_id;
    std::vector<std::string> nodes;
  };
  bool relaunch = false;
  int next_launch = 0;
  std::vector<std::string> nodes;  // the next launch's nodes; empty: the whole allocation
  int exit_code = 0;
  // Nodes of the run's other jobs (its spare pool jobs) the launch runs on too.
  std::vector<OtherJob> other_jobs{};
};

// "relaunch <next_launch> <node,node|-|none> [JOB:node,node ...]" ("-": no
// node list, every node of the allocation; JOB: another Slurm job of the run
// whose nodes join the launch; "none": with those, no node of the batch job)
// or "exit <code>". An answer the
// script could misread (bad launch number, odd node names or job ids, code outside
// [0, 255]) becomes "exit <fallback_exit_code>".
std::string FormatNextLaunchLine(const NextLaunchChoice& choice, int fallback_exit_code);

}  // namespace trellis::worker
