#include "controller/core/hang_timeout.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace trellis::controller {
namespace {

std::string Secs(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), s < 10 ? "%.2f s" : "%.0f s", s);
  return buf;
}

TimeoutInForce Bound(double bound_s, const std::string& key, const std::string& why) {
  return {bound_s, false, key + " = " + Secs(bound_s) + (why.empty() ? "" : " (" + why + ")")};
}

// `learned` within [0, bound]: the bound wins when it is shorter.
TimeoutInForce Capped(double learned_s, std::string basis, double bound_s,
                      const std::string& key) {
  if (learned_s >= bound_s) return Bound(bound_s, key, "shorter than learned " + Secs(learned_s));
  return {learned_s, true, std::move(basis)};
}

}  // namespace

void StepGaps::Add(double gap_s, double checkpoint_s) {
  if (!(gap_s >= 0) || !std::isfinite(gap_s)) return;
  if (checkpoint_s > 0 && std::isfinite(checkpoint_s)) {
    checkpoint_max_ = std::max({checkpoint_max_.value_or(0.0), gap_s, checkpoint_s});
    return;
  }
  ++steps_seen_;
  if (ring_.size() < kKept) {
    ring_.push_back(gap_s);
  } else {
    ring_[next_] = gap_s;
    next_ = (next_ + 1) % kKept;
  }
}

std::optional<double> StepGaps::P99() const {
  if (ring_.size() < kMinSeen) return std::nullopt;
  std::vector<double> v = ring_;
  // The nearest rank: with fewer than 100 gaps, the largest.
  size_t k = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(v.size()))) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

TimeoutInForce HangTimeout(const HangTimeoutPolicy& p, const StepGaps& gaps,
                           std::optional<bool> checkpoint_next, bool stopping) {
  const std::string key = "restart.hang_timeout_s";
  if (!p.learned) return Bound(p.bound_s, key, p.not_learned_why);
  if (stopping) return Bound(p.bound_s, key, "the ranks are stopping, maybe checkpointing");
  auto p99 = gaps.P99();
  if (!p99)
    return Bound(p.bound_s, key,
                 "not learned yet: " + std::to_string(gaps.steps_seen()) + " of " +
                     std::to_string(StepGaps::kMinSeen) + " steps seen");
  double steps_s = std::max(p.floor_s, p.factor * *p99);
  char factor[16];
  std::snprintf(factor, sizeof(factor), "%g", p.factor);
  std::string basis = "learned: max(floor " + Secs(p.floor_s) + ", " + factor + " x p99 step " +
                      Secs(*p99) + ")";
  const bool may_checkpoint = checkpoint_next.value_or(true);
  if (may_checkpoint && gaps.LongestCheckpoint()) {
    steps_s += 2 * *gaps.LongestCheckpoint();
    basis += " + 2 x longest checkpoint " + Secs(*gaps.LongestCheckpoint());
  } else if (may_checkpoint) {
    return Bound(p.bound_s, key,
                 checkpoint_next ? "a checkpoint is next and none was timed yet"
                                 : "the ranks do not say when they checkpoint");
  }
  return Capped(steps_s, basis + " = " + Secs(steps_s), p.bound_s, key);
}

TimeoutInForce StartupTimeout(const HangTimeoutPolicy& p,
                              const std::vector<double>& earlier_starts_s) {
  const std::string key = "restart.startup_timeout_s";
  if (!p.learned) return Bound(p.startup_bound_s, key, p.not_learned_why);
  if (earlier_starts_s.empty())
    return Bound(p.startup_bound_s, key, "no earlier launch of the run to learn from");
  double longest = *std::max_element(earlier_starts_s.begin(), earlier_starts_s.end());
  double s = std::max(p.startup_floor_s, p.startup_factor * longest);
  char factor[16];
  std::snprintf(factor, sizeof(factor), "%g", p.startup_factor);
  std::string basis = "learned: max(floor " + Secs(p.startup_floor_s) + ", " + factor +
                      " x longest earlier start " + Secs(longest) + ") = " + Secs(s);
  return Capped(s, basis, p.startup_bound_s, key);
}

}  // namespace trellis::controller
