#pragma once
// The latest step record of every rank of a run (pure). Each run has one set:
// the ranks of its newest (attempt, launch) that reported a step; the first
// record of a newer launch replaces the set, records of an older one are
// ignored. Kept in memory, bounded by the run's world size: a controller
// restart loses the sets and the next steps refill them. Ended runs keep their
// set for `trellis show` until newer ended runs push them out. Not
// thread-safe: the controller's loop thread owns it.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/step_record.h"

namespace trellis::controller {

// The most ranks one page of a run's set holds (GetRun's Run.ranks).
inline constexpr int kMaxRanksPerPage = 4096;

struct RankLatest {
  int attempt = 0;
  int launch = 0;
  int rank = 0;
  std::string node;  // the node whose worker sent the record
  StepRecord record;
  WallTime received;  // when the controller received it
};

struct RankLatestLimits {
  // Ended runs keep their sets while there are at most this many of them...
  size_t max_ended_runs = 32;
  // ...holding at most this many ranks together; the most recently ended run
  // is kept whatever its size.
  size_t max_ended_ranks = 65536;
};

// One page of a run's set, by rank.
struct RankLatestPage {
  int attempt = 0;
  int launch = 0;
  int world = 0;     // ranks of the set's launch
  int reported = 0;  // ranks with a record (of the whole set, not only this page)
  std::vector<RankLatest> ranks;  // ascending rank, from `from`, at most `limit`
  int next = 0;                   // the first rank of the next page; 0: this is the last
};

class RankLatestTable {
 public:
  enum class Result {
    kStored,
    kNoSet,       // the run has no set, or an older launch's: Begin, then Record again
    kStale,       // the run's set is of a newer launch: ignored
    kOutOfRange,  // rank outside [0, world): ignored
  };

  explicit RankLatestTable(RankLatestLimits limits = {}) : limits_(limits) {}

  // Keeps `record` as the latest of `rank`, replacing the one received before.
  Result Record(const std::string& run_id, int attempt, int launch, int rank,
                std::string_view node, const StepRecord& record, WallTime received);

  // Starts the run's set for (attempt, launch) with `world` ranks, dropping an
  // older launch's set. False, changing nothing, when the run's set is of the
  // same or a newer launch, or world < 1.
  bool Begin(const std::string& run_id, int attempt, int launch, int world);

  // The run reached a terminal state; its set stays among the ended ones.
  void MarkEnded(const std::string& run_id);

  // `from` < 0 reads as 0; `limit` <= 0 or above kMaxRanksPerPage reads as
  // kMaxRanksPerPage. nullopt: the run has no set.
  std::optional<RankLatestPage> Page(const std::string& run_id, int from, int limit) const;

  size_t runs() const { return sets_.size(); }
  size_t ranks_held() const;

 private:
  struct Set {
    int attempt = 0;
    int launch = 0;
    int world = 0;
    bool ended = false;
    std::map<int, RankLatest> ranks;
  };
  void DropEnded(const std::string& run_id);
  void Evict();

  RankLatestLimits limits_;
  std::unordered_map<std::string, Set> sets_;
  std::deque<std::string> ended_;  // oldest ended first
  size_t ended_ranks_ = 0;         // ranks held by ended runs' sets
};

}  // namespace trellis::controller
