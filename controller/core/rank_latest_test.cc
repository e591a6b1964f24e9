#include "controller/core/rank_latest.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

using Result = RankLatestTable::Result;

StepRecord Step(int64_t step, std::optional<int64_t> alloc_retries = std::nullopt) {
  StepRecord r;
  r.step = step;
  r.loss = 2.0;
  r.tokens = 100;
  r.step_seconds = 0.5;
  r.alloc_retries = alloc_retries;
  return r;
}

std::vector<int> Ranks(const RankLatestPage& page) {
  std::vector<int> out;
  for (const auto& r : page.ranks) out.push_back(r.rank);
  return out;
}

class RankLatestTest : public ::testing::Test {
 protected:
  // Begins the launch's set when needed, as the controller does.
  Result Put(RankLatestTable& t, const std::string& run, int attempt, int launch, int rank,
             int64_t step, int world = 4, std::string node = "node1") {
    Result r = t.Record(run, attempt, launch, rank, node, Step(step), now_);
    if (r == Result::kNoSet && t.Begin(run, attempt, launch, world))
      r = t.Record(run, attempt, launch, rank, node, Step(step), now_);
    return r;
  }
  WallTime now_ = FakeClock().Now();
};

TEST_F(RankLatestTest, KeepsTheLatestRecordOfEachRankWithItsNodeAndTime) {
  RankLatestTable t;
  EXPECT_EQ(t.Record("r-1", 1, 1, 0, "node1", Step(1), now_), Result::kNoSet);
  ASSERT_TRUE(t.Begin("r-1", 1, 1, 4));
  EXPECT_EQ(t.Record("r-1", 1, 1, 0, "node1", Step(1), now_), Result::kStored);
  EXPECT_EQ(t.Record("r-1", 1, 1, 2, "node2", Step(1, 3), now_), Result::kStored);
  WallTime later = now_ + std::chrono::seconds(2);
  EXPECT_EQ(t.Record("r-1", 1, 1, 0, "node1", Step(2), later), Result::kStored);

  auto page = t.Page("r-1", 0, 0);
  ASSERT_TRUE(page.has_value());
  EXPECT_EQ(page->attempt, 1);
  EXPECT_EQ(page->launch, 1);
  EXPECT_EQ(page->world, 4);
  EXPECT_EQ(page->reported, 2);
  EXPECT_EQ(page->next, 0);
  ASSERT_EQ(Ranks(*page), (std::vector<int>{0, 2}));
  EXPECT_EQ(page->ranks[0].record.step, 2);
  EXPECT_EQ(page->ranks[0].received, later);
  EXPECT_EQ(page->ranks[0].node, "node1");
  EXPECT_EQ(page->ranks[1].node, "node2");
  EXPECT_EQ(page->ranks[1].record.alloc_retries, 3);
  EXPECT_EQ(page->ranks[1].attempt, 1);
  EXPECT_EQ(page->ranks[1].launch, 1);
  EXPECT_FALSE(t.Page("other-1", 0, 0).has_value());
}

TEST_F(RankLatestTest, TheLastReceivedRecordWinsEvenWithALowerStep) {
  RankLatestTable t;
  ASSERT_EQ(Put(t, "r-1", 1, 1, 0, 5), Result::kStored);
  ASSERT_EQ(Put(t, "r-1", 1, 1, 0, 3), Result::kStored);
  EXPECT_EQ(t.Page("r-1", 0, 0)->ranks[0].record.step, 3);
}

TEST_F(RankLatestTest, ANewerLaunchOrAttemptReplacesTheSetAndOlderOnesAreIgnored) {
  RankLatestTable t;
  for (int rank = 0; rank < 4; ++rank) ASSERT_EQ(Put(t, "r-1", 1, 1, rank, 9), Result::kStored);
  // Launch 2 of attempt 1, on 2 ranks: the old launch's ranks are gone.
  EXPECT_EQ(Put(t, "r-1", 1, 2, 1, 1, /*world=*/2), Result::kStored);
  auto page = t.Page("r-1", 0, 0);
  EXPECT_EQ(page->launch, 2);
  EXPECT_EQ(page->world, 2);
  EXPECT_EQ(Ranks(*page), std::vector<int>{1});
  // A late record of launch 1 changes nothing, nor does beginning it again.
  EXPECT_EQ(t.Record("r-1", 1, 1, 0, "node1", Step(10), now_), Result::kStale);
  EXPECT_FALSE(t.Begin("r-1", 1, 1, 4));
  EXPECT_FALSE(t.Begin("r-1", 1, 2, 4));  // the same launch is not restarted
  EXPECT_EQ(t.Page("r-1", 0, 0)->reported, 1);
  // Attempt 2 launch 1 is newer than attempt 1 launch 2.
  EXPECT_EQ(Put(t, "r-1", 2, 1, 3, 1), Result::kStored);
  page = t.Page("r-1", 0, 0);
  EXPECT_EQ(page->attempt, 2);
  EXPECT_EQ(page->launch, 1);
  EXPECT_EQ(Ranks(*page), std::vector<int>{3});
  EXPECT_EQ(t.Record("r-1", 1, 2, 1, "node1", Step(2), now_), Result::kStale);
  EXPECT_EQ(t.ranks_held(), 1u);
}

TEST_F(RankLatestTest, RanksOutsideTheWorldAreRefused) {
  RankLatestTable t;
  EXPECT_EQ(Put(t, "r-1", 1, 1, 4, 1), Result::kOutOfRange);
  EXPECT_EQ(Put(t, "r-1", 1, 1, -1, 1), Result::kOutOfRange);
  EXPECT_EQ(t.Page("r-1", 0, 0)->reported, 0);
  EXPECT_FALSE(t.Begin("r-2", 1, 1, 0));
  EXPECT_EQ(t.Record("r-2", 1, 1, 0, "node1", Step(1), now_), Result::kNoSet);
}

TEST_F(RankLatestTest, PagesByRank) {
  RankLatestTable t;
  for (int rank : {7, 0, 3, 5, 1}) ASSERT_EQ(Put(t, "r-1", 1, 1, rank, 1, 8), Result::kStored);
  auto page = t.Page("r-1", 0, 2);
  EXPECT_EQ(Ranks(*page), (std::vector<int>{0, 1}));
  EXPECT_EQ(page->next, 3);
  EXPECT_EQ(page->reported, 5);
  page = t.Page("r-1", page->next, 2);
  EXPECT_EQ(Ranks(*page), (std::vector<int>{3, 5}));
  EXPECT_EQ(page->next, 7);
  page = t.Page("r-1", page->next, 2);
  EXPECT_EQ(Ranks(*page), std::vector<int>{7});
  EXPECT_EQ(page->next, 0);
  EXPECT_EQ(Ranks(*t.Page("r-1", 2, 0)), (std::vector<int>{3, 5, 7}));  // from a rank not held
  EXPECT_EQ(Ranks(*t.Page("r-1", -5, 1)), std::vector<int>{0});
  EXPECT_TRUE(t.Page("r-1", 8, 0)->ranks.empty());
}

TEST_F(RankLatestTest, APageHoldsAtMostTheCap) {
  RankLatestTable t;
  const int world = kMaxRanksPerPage + 10;
  for (int rank = 0; rank < world; ++rank)
    ASSERT_EQ(Put(t, "big-1", 1, 1, rank, 1, world), Result::kStored);
  auto page = t.Page("big-1", 0, 0);
  EXPECT_EQ(static_cast<int>(page->ranks.size()), kMaxRanksPerPage);
  EXPECT_EQ(page->next, kMaxRanksPerPage);
  EXPECT_EQ(page->reported, world);
  EXPECT_EQ(static_cast<int>(t.Page("big-1", 0, kMaxRanksPerPage * 2)->ranks.size()),
            kMaxRanksPerPage);
  EXPECT_EQ(t.Page("big-1", page->next, 0)->ranks.size(), 10u);
}

TEST_F(RankLatestTest, EndedRunsAreKeptUpToTheirCountAndOldestEndedGoFirst) {
  RankLatestTable t(RankLatestLimits{/*max_ended_runs=*/2, /*max_ended_ranks=*/1000});
  for (const char* run : {"a-1", "b-2", "c-3", "live-4"})
    ASSERT_EQ(Put(t, run, 1, 1, 0, 1), Result::kStored);
  t.MarkEnded("b-2");
  t.MarkEnded("a-1");
  t.MarkEnded("a-1");  // twice is once
  t.MarkEnded("none-9");
  EXPECT_EQ(t.runs(), 4u);
  t.MarkEnded("c-3");  // b-2 ended first: it goes
  EXPECT_FALSE(t.Page("b-2", 0, 0).has_value());
  EXPECT_TRUE(t.Page("a-1", 0, 0).has_value());
  EXPECT_TRUE(t.Page("c-3", 0, 0).has_value());
  EXPECT_TRUE(t.Page("live-4", 0, 0).has_value());  // running runs are never evicted
  // An ended run's late record of its own launch still lands.
  EXPECT_EQ(t.Record("c-3", 1, 1, 1, "node2", Step(2), now_), Result::kStored);
  EXPECT_EQ(t.Page("c-3", 0, 0)->reported, 2);
  // An evicted run starts no set by itself: Record says kNoSet (the
  // controller then finds the run terminal and stops there).
  EXPECT_EQ(t.Record("b-2", 1, 1, 0, "node1", Step(3), now_), Result::kNoSet);
}

TEST_F(RankLatestTest, EndedRunsAreKeptUpToTheirRanksButTheNewestAlwaysStays) {
  RankLatestTable t(RankLatestLimits{/*max_ended_runs=*/10, /*max_ended_ranks=*/6});
  for (int rank = 0; rank < 4; ++rank) {
    ASSERT_EQ(Put(t, "a-1", 1, 1, rank, 1, 8), Result::kStored);
    ASSERT_EQ(Put(t, "b-2", 1, 1, rank, 1, 8), Result::kStored);
  }
  t.MarkEnded("a-1");
  EXPECT_TRUE(t.Page("a-1", 0, 0).has_value());
  t.MarkEnded("b-2");  // 8 ranks > 6: a-1 goes
  EXPECT_FALSE(t.Page("a-1", 0, 0).has_value());
  ASSERT_TRUE(t.Page("b-2", 0, 0).has_value());
  // Growing past the cap on its own, the newest ended run stays.
  for (int rank = 4; rank < 8; ++rank) ASSERT_EQ(Put(t, "b-2", 1, 1, rank, 2, 8), Result::kStored);
  EXPECT_EQ(t.Page("b-2", 0, 0)->reported, 8);
  EXPECT_EQ(t.ranks_held(), 8u);
}

TEST_F(RankLatestTest, ANewLaunchOfAnEndedRunLeavesTheEndedList) {
  RankLatestTable t(RankLatestLimits{/*max_ended_runs=*/1, /*max_ended_ranks=*/100});
  ASSERT_EQ(Put(t, "a-1", 1, 1, 0, 1), Result::kStored);
  t.MarkEnded("a-1");
  ASSERT_EQ(Put(t, "a-1", 2, 1, 0, 1), Result::kStored);  // live again
  ASSERT_EQ(Put(t, "b-2", 1, 1, 0, 1), Result::kStored);
  t.MarkEnded("b-2");  // the only ended run: a-1 is not evicted for it
  EXPECT_TRUE(t.Page("a-1", 0, 0).has_value());
  EXPECT_TRUE(t.Page("b-2", 0, 0).has_value());
  t.MarkEnded("a-1");  // now two ended, one allowed: b-2 ended first
  EXPECT_FALSE(t.Page("b-2", 0, 0).has_value());
  EXPECT_EQ(t.Page("a-1", 0, 0)->attempt, 2);
}

}  // namespace
}  // namespace trellis::controller
