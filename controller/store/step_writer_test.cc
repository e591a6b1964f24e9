// The step pipeline's writer on a real SQLite file: batches stored whole and
// once (across a reopen too), a failed transaction stores nothing, and the
// retention policy against a plain reference.

#include "controller/store/step_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <set>

#include "controller/store/store.h"

namespace trellis::controller {
namespace {

class StepWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("step_writer_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "trellis.db").string();
    auto s = Store::Open(path_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    auto r = store_->CreateRun("hello", "alice", "[job]\nname='x'\n", 2, 2,
                               [](const std::string& id) { return "/out/" + id; }, clock_.Now());
    ASSERT_TRUE(r.ok()) << r.status();
    run_ = r->run_id;
    Reopen();
  }
  void TearDown() override {
    writer_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    writer_.reset();
    auto w = StepWriter::Open(path_);
    ASSERT_TRUE(w.ok()) << w.status();
    writer_ = std::move(*w);
  }
  StepBatch Batch(const std::string& node, uint64_t seq, std::vector<std::pair<int, int64_t>> rs,
                  int launch = 1) {
    StepBatch b{{run_, 1, launch, node}, seq, {}};
    for (auto [rank, step] : rs) {
      StepRecord rec;
      rec.step = step;
      rec.loss = 1.0 + rank;
      rec.tokens = 10;
      rec.step_seconds = 0.1 * (rank + 1);
      b.records.push_back({rank, rec});
    }
    return b;
  }
  std::vector<StepRow> Rows() { return *store_->RecentSteps(run_, 1000000); }

  std::filesystem::path dir_;
  std::string path_;
  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<StepWriter> writer_;
  std::string run_;
};

TEST_F(StepWriterTest, StoresBatchesWholeAndEachOnceAcrossAReopen) {
  StepBatch a = Batch("node1", 1, {{0, 1}, {1, 1}});
  StepBatch b = Batch("node2", 1, {{2, 1}, {3, 1}});
  StepBatch a2 = Batch("node1", 2, {{0, 2}, {1, 2}});
  auto out = writer_->Commit({&a, &b, &a2}, clock_.Now());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->results, (std::vector<BatchResult>(3, BatchResult::kStored)));
  ASSERT_EQ(out->rows.size(), 2u);  // one row per step changed
  EXPECT_EQ(out->rows[0].row.step, 1);
  EXPECT_EQ(out->rows[0].row.ranks, 4);
  EXPECT_DOUBLE_EQ(out->rows[0].row.loss_sum, 1 + 2 + 3 + 4);
  EXPECT_DOUBLE_EQ(out->rows[0].row.step_seconds_max, 0.4);
  EXPECT_EQ(out->rows[1].row.ranks, 2);

  // Sent again (the acks were lost): known, not counted twice; a later
  // batch of the same worker in the same commit is stored.
  StepBatch a3 = Batch("node1", 3, {{0, 3}});
  out = writer_->Commit({&a, &a3, &a2}, clock_.Now());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->results, (std::vector<BatchResult>{BatchResult::kDuplicate, BatchResult::kStored,
                                                    BatchResult::kDuplicate}));
  // After a controller restart too: the seqs are in the database.
  Reopen();
  out = writer_->Commit({&b, &a3}, clock_.Now());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->results, (std::vector<BatchResult>(2, BatchResult::kDuplicate)));
  EXPECT_TRUE(out->rows.empty());
  std::vector<StepRow> rows = Rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].ranks, 4);
  EXPECT_EQ(rows[0].tokens, 40);
  EXPECT_EQ(rows[1].ranks, 2);
  EXPECT_EQ(rows[2].ranks, 1);
}

// A batch of a run the store does not have breaks the transaction: nothing
// of the commit is stored, and the good batch is stored when sent again.
TEST_F(StepWriterTest, AFailedTransactionStoresNothingAndForgetsNothing) {
  StepBatch good = Batch("node1", 1, {{0, 1}});
  StepBatch bad = Batch("node2", 1, {{2, 1}});
  bad.source.run_id = "no-such-run";
  auto out = writer_->Commit({&good, &bad}, clock_.Now());
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(Rows().empty());
  out = writer_->Commit({&good}, clock_.Now());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->results, std::vector<BatchResult>{BatchResult::kStored});
  EXPECT_EQ(Rows().size(), 1u);
}

// The kept steps against a plain reading of the policy, on a random history
// of launches (each resuming a little before the last one's end).
TEST_F(StepWriterTest, PruneKeepsWhatThePolicySays) {
  std::mt19937 rng(std::random_device{}());
  const StepRetention policy{std::uniform_int_distribution<int64_t>(5, 40)(rng),
                             std::uniform_int_distribution<int64_t>(2, 9)(rng)};
  std::map<int, std::pair<int64_t, int64_t>> launches;  // launch -> first, last
  int64_t step = 0;
  uint64_t seq = 0;
  for (int launch = 1; launch <= 4; ++launch) {
    int64_t first = std::max<int64_t>(0, step - std::uniform_int_distribution<int64_t>(0, 6)(rng));
    int64_t last = first + std::uniform_int_distribution<int64_t>(20, 60)(rng);
    for (int64_t s = first; s <= last; ++s) {
      StepBatch b = Batch("node1", ++seq, {{0, s}, {1, s}}, launch);
      ASSERT_TRUE(writer_->Commit({&b}, clock_.Now()).ok());
    }
    launches[launch] = {first, last};
    step = last;
  }
  std::set<std::tuple<int, int64_t>> expect;
  for (const auto& [launch, span] : launches)
    for (int64_t s = span.first; s <= span.second; ++s)
      if (s >= step - policy.keep_full || s % policy.thin_every == 0 || s == span.first ||
          s == span.second)
        expect.insert({launch, s});
  auto deleted = writer_->Prune(policy);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  std::set<std::tuple<int, int64_t>> got;
  for (const StepRow& r : Rows()) got.insert({r.launch, r.step});
  EXPECT_EQ(got, expect) << "keep_full " << policy.keep_full << " thin_every "
                         << policy.thin_every;
  EXPECT_GT(*deleted, 0);
  // Nothing new written: the next prune has nothing to do.
  EXPECT_EQ(*writer_->Prune(policy), 0);
}

}  // namespace
}  // namespace trellis::controller
