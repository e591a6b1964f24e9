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
  std::string nodes = choice.nodes.empty() ? "-" : absl::StrJoin(choice.nodes, ",");
  return absl::StrCat("relaunch ", choice.next_launch, " ", nodes);
}

}  // namespace trellis::worker
