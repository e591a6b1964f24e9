#pragma once
// Hangs and lost workers, from what the controller last heard and `now`
// (pure; the shell calls these on a timer and feeds the findings into
// ClassifyLaunch, failure_class.h). See docs/architecture.md, "A run's life,
// as implemented".

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "controller/core/failure_class.h"

namespace trellis::controller {

struct RankProgress {
  int rank = 0;
  std::string node;
  int64_t last_step = -1;  // -1: no step reported yet
  SteadyTime last_change;  // when last_step last changed
  // The rank's own timeout (hang_timeout.h: learned, its next step's); none:
  // FindHang's hang_timeout or startup_timeout.
  std::optional<std::chrono::milliseconds> timeout;
  // Its process's state as its worker last read it (/proc/PID/stat): 'T'
  // stopped, 'D' waiting in the kernel; 0: not known.
  char process_state = 0;
};

// `ranks`: every rank of the launch, those that have not reported included.
// A rank that reported a step and no newer one for hang_timeout hangs; a rank
// with no step yet hangs startup_timeout after launch_started (model load,
// data, NCCL init come first); a rank with its own `timeout` is held to it.
// Of the hung ranks, one whose process is stopped or stuck in the kernel is
// the culprit; else the one silent longest (ties: the lowest rank), which
// stopped first. But in a stuck collective every rank stops at the same
// step, and then the step records cannot tell which one held the others:
// `culprit_unknown` says so (failure_class.h blames no node for it).
std::optional<HangEvidence> FindHang(const std::vector<RankProgress>& ranks,
                                     SteadyTime launch_started, SteadyTime now,
                                     std::chrono::seconds hang_timeout,
                                     std::chrono::seconds startup_timeout);

// Workers not heard from (heartbeat or any message) for heartbeat_timeout,
// in NaturalLess order.
std::vector<std::string> FindLostWorkers(const std::map<std::string, SteadyTime>& last_heard,
                                         SteadyTime now, std::chrono::seconds heartbeat_timeout);

}  // namespace trellis::controller
