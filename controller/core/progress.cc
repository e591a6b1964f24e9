#include "controller/core/progress.h"

#include <algorithm>

#include "controller/core/decisions.h"

namespace trellis::controller {
namespace {
// A process stopped (SIGSTOP, a debugger) or waiting in the kernel (a
// driver, a dead filesystem) holds the others; one spinning or sleeping in a
// collective is held.
bool ProcessStuck(char state) { return state == 'T' || state == 't' || state == 'D'; }
}  // namespace

std::optional<HangEvidence> FindHang(const std::vector<RankProgress>& ranks,
                                     SteadyTime launch_started, SteadyTime now,
                                     std::chrono::seconds hang_timeout,
                                     std::chrono::seconds startup_timeout) {
  const RankProgress* worst = nullptr;
  SteadyTime::duration worst_silent{};
  bool worst_stuck = false;
  for (const auto& r : ranks) {
    bool started = r.last_step >= 0;
    SteadyTime::duration silent = now - (started ? r.last_change : launch_started);
    SteadyTime::duration limit = started ? hang_timeout : startup_timeout;
    if (r.timeout) limit = *r.timeout;
    if (silent < limit) continue;
    const bool stuck = ProcessStuck(r.process_state);
    if (worst == nullptr || (stuck && !worst_stuck) ||
        (stuck == worst_stuck && (silent > worst_silent ||
                                  (silent == worst_silent && r.rank < worst->rank)))) {
      worst = &r;
      worst_silent = silent;
      worst_stuck = stuck;
    }
  }
  if (worst == nullptr) return std::nullopt;
  HangEvidence h;
  h.rank = worst->rank;
  h.node = worst->node;
  h.last_step = worst->last_step;
  h.silent_s = std::chrono::duration<double>(worst_silent).count();
  h.before_first_step = worst->last_step < 0;
  h.process_state = worst->process_state;
  // Lockstep: every rank at the hung rank's step (none ended before it).
  h.culprit_unknown = !worst_stuck && !h.before_first_step && ranks.size() > 1 &&
                      std::all_of(ranks.begin(), ranks.end(), [&](const RankProgress& r) {
                        return r.last_step == worst->last_step;
                      });
  h.timeout_s = std::chrono::duration<double>(
                    worst->timeout ? *worst->timeout
                                   : SteadyTime::duration(h.before_first_step ? startup_timeout
                                                                              : hang_timeout))
                    .count();
  return h;
}

std::vector<std::string> FindLostWorkers(const std::map<std::string, SteadyTime>& last_heard,
                                         SteadyTime now, std::chrono::seconds heartbeat_timeout) {
  std::vector<std::string> lost;
  for (const auto& [node, heard] : last_heard)
    if (now - heard >= heartbeat_timeout) lost.push_back(node);
  std::sort(lost.begin(), lost.end(), NaturalLess);
  return lost;
}

}  // namespace trellis::controller
