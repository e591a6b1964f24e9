#include "trainer_core/parallel/comm_times.h"

#include <algorithm>
#include <map>
#include <utility>

namespace trellis::train {

CommTimes SumCollectives(const std::vector<CollectiveSpan>& spans) {
  CommTimes t;
  std::map<int, double> free_at;  // per group: when its last collective ended
  std::vector<std::pair<double, double>> waits;
  for (const CollectiveSpan& s : spans) {
    auto [it, first] = free_at.emplace(s.group, s.issued);
    const double start = first ? s.issued : std::max(s.issued, it->second);
    t.total += std::max(0.0, s.done - start);
    it->second = std::max(it->second, s.done);
    if (s.waited >= 0 && s.done > s.waited) waits.emplace_back(s.waited, s.done);
  }
  // The union of the waits (the caller waits for one thing at a time, but a
  // GPU's clocks may let neighbours overlap by microseconds).
  std::sort(waits.begin(), waits.end());
  double covered_to = 0;
  bool any = false;
  for (const auto& [from, to] : waits) {
    const double lo = any ? std::max(from, covered_to) : from;
    if (to > lo) t.exposed += to - lo;
    covered_to = any ? std::max(covered_to, to) : to;
    any = true;
  }
  t.exposed = std::min(t.exposed, t.total);  // rounding only
  return t;
}

}  // namespace trellis::train
