#include "worker/core/retry.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/core/args.h"

namespace trellis::worker {

std::chrono::milliseconds BackoffDelay(const BackoffPolicy& policy, int retry, double unit_random) {
  double base = static_cast<double>(policy.initial.count()) *
                std::pow(policy.multiplier, std::clamp(retry, 0, 62));
  base = std::min(base, static_cast<double>(policy.max.count()));
  double factor = 1.0 + policy.jitter * (2.0 * std::clamp(unit_random, 0.0, 1.0) - 1.0);
  return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(base * factor)));
}

std::string FormatNextLaunchLine(const NextLaunchChoice& choice, int fallback_exit_code) {
  std::string fallback = absl::StrCat("exit ", fallback_exit_code);
  if (!choice.relaunch) {
    if (choice.exit_code < 0 || choice.exit_code > 255) return fallback;
    return absl::StrCat("exit ", choice.exit_code);
  }
  if (choice.next_launch < 1) return fallback;
  for (const std::string& node : choice.nodes)
    if (!IsSafeName(node)) return fallback;
  // No node of its own with other jobs' nodes: the batch job runs no step.
  std::string nodes = !choice.nodes.empty()       ? absl::StrJoin(choice.nodes, ",")
                      : choice.other_jobs.empty() ? "-"
                                                  : "none";
  std::string line = absl::StrCat("relaunch ", choice.next_launch, " ", nodes);
  for (const auto& job : choice.other_jobs) {
    const bool digits = !job.job_id.empty() && job.job_id.size() <= 20 &&
                        std::all_of(job.job_id.begin(), job.job_id.end(),
                                    [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || job.nodes.empty()) return fallback;
    for (const std::string& node : job.nodes)
      if (!IsSafeName(node)) return fallback;
    absl::StrAppend(&line, " ", job.job_id, ":", absl::StrJoin(job.nodes, ","));
  }
  return line;
}

}  // namespace trellis::worker
