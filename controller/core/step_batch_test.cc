#include "controller/core/step_batch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace trellis::controller {
namespace {

StepBatch Batch(uint64_t seq, std::vector<RankStepRecord> records) {
  return {{"run-1", 1, 1, "node1"}, seq, std::move(records)};
}

RankStepRecord Rec(int rank, int64_t step, double loss, double seconds = 0.5) {
  StepRecord r;
  r.step = step;
  r.loss = loss;
  r.tokens = 100;
  r.step_seconds = seconds;
  return {rank, r};
}

TEST(CheckBatch, AcceptsAWellFormedBatch) {
  EXPECT_FALSE(CheckBatch(Batch(1, {Rec(0, 1, 2.0), Rec(1, 1, 2.5)})).has_value());
}

TEST(CheckBatch, RefusesEachFaultNamingTheField) {
  auto seq = CheckBatch(Batch(0, {Rec(0, 1, 2.0)}));
  ASSERT_TRUE(seq);
  EXPECT_EQ(seq->fault, BatchFault::kBadSeq);
  EXPECT_NE(seq->error.find("seq"), std::string::npos);

  auto empty = CheckBatch(Batch(1, {}));
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->fault, BatchFault::kEmpty);

  std::vector<RankStepRecord> many(kMaxBatchRecords + 1, Rec(0, 1, 2.0));
  auto big = CheckBatch(Batch(1, many));
  ASSERT_TRUE(big);
  EXPECT_EQ(big->fault, BatchFault::kOversized);
  EXPECT_NE(big->error.find("4096"), std::string::npos);

  auto rank = CheckBatch(Batch(1, {Rec(0, 1, 2.0), Rec(-1, 1, 2.0)}));
  ASSERT_TRUE(rank);
  EXPECT_EQ(rank->fault, BatchFault::kBadRank);
  EXPECT_NE(rank->error.find("steps[1].rank"), std::string::npos);

  auto loss = CheckBatch(Batch(1, {Rec(0, 1, std::nan(""))}));
  ASSERT_TRUE(loss);
  EXPECT_EQ(loss->fault, BatchFault::kBadRecord);
  EXPECT_NE(loss->error.find("steps[0].record.loss"), std::string::npos);

  RankStepRecord neg = Rec(0, 1, 2.0);
  neg.record.fwd_seconds = -1;
  auto fwd = CheckBatch(Batch(1, {Rec(0, 1, 2.0), neg}));
  ASSERT_TRUE(fwd);
  EXPECT_NE(fwd->error.find("steps[1].record.fwd_seconds"), std::string::npos);
}

// The fold against a plain sum per step, on random records.
TEST(FoldBatch, MatchesAPlainSumPerStepOnRandomBatches) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> step(0, 5), rank(0, 63);
  std::uniform_real_distribution<double> loss(0, 10), secs(0, 2);
  std::map<StepKey, StepDelta> deltas;
  std::map<int64_t, std::vector<StepRecord>> by_step;
  for (uint64_t seq = 1; seq <= 20; ++seq) {
    std::vector<RankStepRecord> records;
    for (int i = 0; i < 16; ++i) {
      RankStepRecord r = Rec(rank(rng), step(rng), loss(rng), secs(rng));
      by_step[r.record.step].push_back(r.record);
      records.push_back(r);
    }
    FoldBatch(Batch(seq, records), &deltas);
  }
  ASSERT_EQ(deltas.size(), by_step.size());
  for (const auto& [s, records] : by_step) {
    const StepDelta& d = deltas.at(StepKey{"run-1", 1, 1, s});
    double sum = 0, max = 0;
    for (const auto& r : records) {
      sum += r.loss;
      max = std::max(max, r.step_seconds);
    }
    EXPECT_EQ(d.ranks, static_cast<int>(records.size()));
    EXPECT_NEAR(d.loss_sum, sum, 1e-9);
    EXPECT_EQ(d.tokens, 100 * static_cast<int64_t>(records.size()));
    EXPECT_DOUBLE_EQ(d.step_seconds_max, max);
    EXPECT_DOUBLE_EQ(d.last.loss, records.back().loss);
  }
}

}  // namespace
}  // namespace trellis::controller
