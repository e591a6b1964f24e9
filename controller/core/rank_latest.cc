#include "controller/core/rank_latest.h"

#include <algorithm>
#include <tuple>

namespace trellis::controller {

RankLatestTable::Result RankLatestTable::Record(const std::string& run_id, int attempt,
                                                int launch, int rank, std::string_view node,
                                                const StepRecord& record, WallTime received) {
  auto it = sets_.find(run_id);
  if (it == sets_.end()) return Result::kNoSet;
  Set& set = it->second;
  auto key = std::make_tuple(attempt, launch);
  auto held = std::make_tuple(set.attempt, set.launch);
  if (key < held) return Result::kStale;
  if (held < key) return Result::kNoSet;
  if (rank < 0 || rank >= set.world) return Result::kOutOfRange;
  auto [entry, added] = set.ranks.try_emplace(rank);
  RankLatest& r = entry->second;
  r.attempt = attempt;
  r.launch = launch;
  r.rank = rank;
  if (r.node != node) r.node.assign(node);
  r.record = record;
  r.received = received;
  if (added && set.ended) {
    ++ended_ranks_;
    Evict();
  }
  return Result::kStored;
}

bool RankLatestTable::Begin(const std::string& run_id, int attempt, int launch, int world) {
  if (world < 1) return false;
  auto it = sets_.find(run_id);
  if (it != sets_.end()) {
    if (std::make_tuple(attempt, launch) <= std::make_tuple(it->second.attempt, it->second.launch))
      return false;
    if (it->second.ended) DropEnded(run_id);
  }
  Set& set = sets_[run_id];
  set = Set{};
  set.attempt = attempt;
  set.launch = launch;
  set.world = world;
  return true;
}

void RankLatestTable::MarkEnded(const std::string& run_id) {
  auto it = sets_.find(run_id);
  if (it == sets_.end() || it->second.ended) return;
  it->second.ended = true;
  ended_.push_back(run_id);
  ended_ranks_ += it->second.ranks.size();
  Evict();
}

void RankLatestTable::DropEnded(const std::string& run_id) {
  auto it = sets_.find(run_id);
  if (it == sets_.end() || !it->second.ended) return;
  ended_ranks_ -= it->second.ranks.size();
  it->second.ended = false;
  ended_.erase(std::find(ended_.begin(), ended_.end(), run_id));
}

void RankLatestTable::Evict() {
  while (ended_.size() > limits_.max_ended_runs ||
         (ended_.size() > 1 && ended_ranks_ > limits_.max_ended_ranks)) {
    auto it = sets_.find(ended_.front());
    ended_ranks_ -= it->second.ranks.size();
    sets_.erase(it);
    ended_.pop_front();
  }
}

std::optional<RankLatestPage> RankLatestTable::Page(const std::string& run_id, int from,
                                                    int limit) const {
  auto it = sets_.find(run_id);
  if (it == sets_.end()) return std::nullopt;
  const Set& set = it->second;
  from = std::max(from, 0);
  if (limit <= 0 || limit > kMaxRanksPerPage) limit = kMaxRanksPerPage;
  RankLatestPage page;
  page.attempt = set.attempt;
  page.launch = set.launch;
  page.world = set.world;
  page.reported = static_cast<int>(set.ranks.size());
  auto r = set.ranks.lower_bound(from);
  for (; r != set.ranks.end() && static_cast<int>(page.ranks.size()) < limit; ++r)
    page.ranks.push_back(r->second);
  if (r != set.ranks.end()) page.next = r->first;
  return page;
}

size_t RankLatestTable::ranks_held() const {
  size_t n = 0;
  for (const auto& [id, set] : sets_) n += set.ranks.size();
  return n;
}

}  // namespace trellis::controller
