#include "bench/goodput-sim/cluster.h"

#include <algorithm>
#include <cmath>

#include "controller/core/decisions.h"

namespace trellis::bench {

Cluster::Cluster(int nodes) {
  for (int i = 1; i <= nodes; ++i) names_.push_back("node" + std::to_string(i));
}

int Cluster::IndexOf(const std::string& node) const {
  if (node.rfind("node", 0) != 0) return -1;
  int i = std::atoi(node.c_str() + 4) - 1;
  return i >= 0 && i < static_cast<int>(names_.size()) ? i : -1;
}

std::vector<std::string> Cluster::Allocate(const std::vector<std::string>& excluded, int count,
                                           Rng& rng) const {
  std::vector<char> out_of_reach(names_.size(), 0);
  for (const auto& n : excluded)
    if (int i = IndexOf(n); i >= 0) out_of_reach[i] = 1;
  std::vector<int> eligible;
  for (int i = 0; i < static_cast<int>(names_.size()); ++i)
    if (!out_of_reach[i]) eligible.push_back(i);
  int take = std::min<int>(count, eligible.size());
  for (int k = 0; k < take; ++k)  // partial Fisher-Yates
    std::swap(eligible[k], eligible[k + rng.Below(eligible.size() - k)]);
  eligible.resize(take);
  std::sort(eligible.begin(), eligible.end());  // index order is NaturalLess order
  std::vector<std::string> out;
  for (int i : eligible) out.push_back(names_[i]);
  return out;
}

void Cluster::MarkFaulty(const std::string& node, FaultKind kind, int64_t now_ms,
                         int64_t repair_at_ms) {
  int i = IndexOf(node);
  if (i >= 0 && !IsFaulty(node, now_ms)) faulty_[i] = {kind, repair_at_ms};
}

void Cluster::Repair(const std::string& node) { faulty_.erase(IndexOf(node)); }

bool Cluster::IsFaulty(const std::string& node, int64_t now_ms) const {
  auto it = faulty_.find(IndexOf(node));
  return it != faulty_.end() && now_ms < it->second.repair_at_ms;
}

int Cluster::FaultyCount(int64_t now_ms) const {
  int n = 0;
  for (const auto& [i, f] : faulty_) n += now_ms < f.repair_at_ms;
  return n;
}

std::optional<Cluster::Repeat> Cluster::NextRepeat(const std::vector<std::string>& running,
                                                   int64_t now_ms, double mean_s, Rng& rng) const {
  std::optional<Repeat> first;
  for (const auto& [i, f] : faulty_) {
    if (now_ms >= f.repair_at_ms ||
        !std::binary_search(running.begin(), running.end(), names_[i], controller::NaturalLess))
      continue;
    int64_t at = now_ms + static_cast<int64_t>(std::ceil(rng.Exponential(mean_s) * 1000.0));
    if (at < f.repair_at_ms && (!first || at < first->at_ms)) first = Repeat{at, names_[i], f.kind};
  }
  return first;
}

}  // namespace trellis::bench
