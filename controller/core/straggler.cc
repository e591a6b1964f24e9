#include "controller/core/straggler.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace trellis::controller {
namespace {

constexpr double PhaseTimes::*kPhases[] = {&PhaseTimes::step_s, &PhaseTimes::fwd_s,
                                           &PhaseTimes::bwd_s, &PhaseTimes::optim_s,
                                           &PhaseTimes::comm_s};

// The median of the reported (non-zero) values; 0 when there are none.
double Median(std::vector<double> v) {
  v.erase(std::remove(v.begin(), v.end(), 0.0), v.end());
  if (v.empty()) return 0;
  size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  double lo = *std::max_element(v.begin(), v.begin() + mid);
  return (lo + hi) / 2;
}

// For every rank, the median of the other ranks' reported values, in
// O(n log n) for all of them: sort once, then skip the rank's own value.
std::vector<double> OthersMedians(const std::vector<double>& values) {
  std::vector<double> sorted;
  for (double v : values)
    if (v > 0) sorted.push_back(v);
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> out(values.size(), 0);
  for (size_t r = 0; r < values.size(); ++r) {
    bool own = values[r] > 0;
    size_t m = sorted.size() - (own ? 1 : 0);
    if (m == 0) continue;
    size_t skip = own ? std::lower_bound(sorted.begin(), sorted.end(), values[r]) - sorted.begin()
                      : sorted.size();
    auto kth = [&](size_t k) { return k < skip ? sorted[k] : sorted[k + 1]; };
    out[r] = m % 2 == 1 ? kth(m / 2) : (kth(m / 2 - 1) + kth(m / 2)) / 2;
  }
  return out;
}

}  // namespace

StepSpread SpreadOf(int64_t step, const std::vector<PhaseTimes>& times) {
  StepSpread s;
  s.step = step;
  std::vector<double> step_s;
  for (size_t r = 0; r < times.size(); ++r) {
    step_s.push_back(times[r].step_s);
    if (times[r].step_s > s.slowest_s) {
      s.slowest_s = times[r].step_s;
      s.slowest_rank = static_cast<int>(r);
    }
  }
  s.median_s = Median(std::move(step_s));
  return s;
}

StragglerWindow::StragglerWindow(int world_size, int window, int min_slow, double factor)
    : world_(std::max(world_size, 0)),
      window_(std::max(window, 1)),
      min_slow_(std::clamp(min_slow, 1, window_)),
      factor_(factor),
      nodes_(world_),
      slow_count_(world_, 0),
      armed_(world_, true),
      held_(world_, false) {}

void StragglerWindow::HoldEpisode(int rank) {
  if (rank < 0 || rank >= world_) return;
  armed_[rank] = false;
  held_[rank] = true;
}

void StragglerWindow::Add(int rank, const std::string& node, int64_t step, const PhaseTimes& t) {
  if (rank < 0 || rank >= world_ || step < 0) return;
  if (newest_ >= 0 && step <= newest_ - window_) return;  // older than the window
  if (complete_.count(step) > 0) return;
  if (static_cast<int>(complete_.size()) == window_ && step < complete_.begin()->first) return;
  nodes_[rank] = node;
  if (step > newest_) {
    newest_ = step;
    // Incomplete steps K behind the newest will not complete in time to count.
    pending_.erase(pending_.begin(), pending_.upper_bound(newest_ - window_));
  }
  Pending& p = pending_[step];
  if (p.have.empty()) {
    p.times.resize(world_);
    p.have.resize(world_, false);
  }
  if (p.have[rank]) return;  // a duplicate record: the first one counts
  p.have[rank] = true;
  p.times[rank] = t;
  if (++p.count < world_) return;
  std::vector<PhaseTimes> times = std::move(p.times);
  pending_.erase(step);
  OnComplete(step, std::move(times));
}

void StragglerWindow::OnComplete(int64_t step, std::vector<PhaseTimes> times) {
  std::vector<double> step_s(world_);
  for (int r = 0; r < world_; ++r) step_s[r] = times[r].step_s;
  Complete c;
  c.others_median = OthersMedians(step_s);
  c.slow.resize(world_, false);
  for (int r = 0; r < world_; ++r) {
    c.slow[r] = step_s[r] > 0 && c.others_median[r] > 0 && step_s[r] > factor_ * c.others_median[r];
    if (c.slow[r]) ++slow_count_[r];
  }
  c.times = std::move(times);
  complete_.emplace(step, std::move(c));
  newest_complete_ = std::max(newest_complete_, step);
  if (static_cast<int>(complete_.size()) > window_) {
    const Complete& old = complete_.begin()->second;
    for (int r = 0; r < world_; ++r)
      if (old.slow[r]) --slow_count_[r];
    complete_.erase(complete_.begin());
  }
  Evaluate(step);
}

void StragglerWindow::Evaluate(int64_t step) {
  const int window = static_cast<int>(complete_.size());
  for (int r = 0; r < world_; ++r) {
    if (slow_count_[r] < min_slow_) {
      if (held_[r] && window < window_) continue;  // the steps before the restart are unknown
      if (!armed_[r]) ends_.push_back({r, nodes_[r], step, slow_count_[r], window});
      held_[r] = false;
      armed_[r] = true;
    } else if (armed_[r]) {
      armed_[r] = false;
      events_.push_back(MakeEvent(r));
    }
  }
}

StragglerEvent StragglerWindow::MakeEvent(int rank) const {
  StragglerEvent e;
  e.rank = rank;
  e.node = nodes_[rank];
  e.slow_steps = slow_count_[rank];
  e.window = static_cast<int>(complete_.size());
  std::vector<double> others_step;
  std::vector<std::vector<double>> own(std::size(kPhases)), others(std::size(kPhases));
  double sum = 0;
  for (const auto& [step, c] : complete_) {
    if (!c.slow[rank]) continue;
    sum += c.times[rank].step_s;
    others_step.push_back(c.others_median[rank]);
    for (size_t p = 0; p < std::size(kPhases); ++p) {
      own[p].push_back(c.times[rank].*kPhases[p]);
      std::vector<double> rest;
      for (int r = 0; r < world_; ++r)
        if (r != rank) rest.push_back(c.times[r].*kPhases[p]);
      others[p].push_back(Median(std::move(rest)));
    }
  }
  e.median_others_s = Median(others_step);
  e.rank_s = e.slow_steps > 0 ? sum / e.slow_steps : 0;
  for (size_t p = 0; p < std::size(kPhases); ++p) {
    e.rank_phases.*kPhases[p] = Median(own[p]);
    e.others_phases.*kPhases[p] = Median(others[p]);
  }
  return e;
}

std::vector<StragglerEvent> StragglerWindow::TakeEvents() { return std::exchange(events_, {}); }

std::vector<StragglerEnd> StragglerWindow::TakeEnds() { return std::exchange(ends_, {}); }

std::optional<StepSpread> StragglerWindow::TakeCompleted() {
  if (newest_complete_ <= taken_complete_) return std::nullopt;
  taken_complete_ = newest_complete_;
  auto it = complete_.find(newest_complete_);
  if (it == complete_.end()) return std::nullopt;
  return SpreadOf(it->first, it->second.times);
}

}  // namespace trellis::controller
