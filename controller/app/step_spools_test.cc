// The step spools alone, with a fake reader and ingester: a spool is stored
// whole or tried again, removed once stored, forgotten when gone, and one that
// cannot be read is not read again until named again.
#include "controller/app/step_spools.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <fstream>

#include "common/run_layout.h"

namespace trellis::controller {
namespace {

namespace fs = std::filesystem;

class StepSpoolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("step_spools_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "attempt-1" / "launch-1");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& node) const {
    return StepSpoolPath(dir_.string(), 1, 1, node);
  }
  void Leave(const std::string& node) const { std::ofstream(Path(node)) << "x\n"; }
  // Answers every batch submitted so far: stored, or the store's error.
  void AnswerAll(bool stored) {
    while (!pending_.empty()) {
      auto done = std::move(pending_.front());
      pending_.pop_front();
      done(stored ? absl::StatusOr<BatchResult>(BatchResult::kStored)
                  : absl::ResourceExhaustedError("disk full"));
    }
  }

  fs::path dir_;
  int reads_ = 0;
  absl::Status read_error_ = absl::OkStatus();
  std::deque<Ingester::Done> pending_;
  bool take_ = true;
  StepSpools spools_{
      [this](const std::string& path, const BatchSource& source)
          -> absl::StatusOr<std::vector<StepBatch>> {
        ++reads_;
        if (!fs::exists(path)) return absl::NotFoundError(path);
        if (!read_error_.ok()) return read_error_;
        StepBatch b;
        b.source = source;
        b.seq = 1;
        b.records.resize(3);
        return std::vector<StepBatch>{b, b};
      },
      [this](StepBatch, Ingester::Done done) {
        if (!take_) return false;
        pending_.push_back(std::move(done));
        return true;
      },
      [](std::function<void()> fn) { fn(); }};
};

TEST_F(StepSpoolsTest, AStoredSpoolIsRemovedAndOneNotStoredIsTriedAgain) {
  Leave("node1");
  spools_.Add(dir_.string(), {"r-1", 1, 1, "node1"});
  EXPECT_EQ(spools_.Pending("r-1"), 6);
  EXPECT_EQ(spools_.Total(), 6);
  AnswerAll(false);
  EXPECT_TRUE(fs::exists(Path("node1"))) << "not all stored: kept";
  spools_.TryAll();
  ASSERT_EQ(pending_.size(), 2u) << "sent again";
  AnswerAll(true);
  EXPECT_FALSE(fs::exists(Path("node1")));
  EXPECT_EQ(spools_.Pending("r-1"), 0);
  spools_.TryAll();
  EXPECT_TRUE(pending_.empty());
}

TEST_F(StepSpoolsTest, AnIngesterThatTakesNothingNowLeavesItForLater) {
  Leave("node1");
  take_ = false;
  spools_.Add(dir_.string(), {"r-1", 1, 1, "node1"});
  EXPECT_TRUE(fs::exists(Path("node1")));
  take_ = true;
  spools_.TryAll();
  AnswerAll(true);
  EXPECT_FALSE(fs::exists(Path("node1")));
}

TEST_F(StepSpoolsTest, GoneSpoolsAreForgottenWhileOthersAreTried) {
  Leave("node1");
  Leave("node2");
  spools_.Scan("r-1", dir_.string());
  EXPECT_EQ(spools_.Total(), 12);
  AnswerAll(false);
  fs::remove(Path("node1"));  // stored by a controller before this one
  spools_.TryAll();
  EXPECT_EQ(spools_.Total(), 6);
  AnswerAll(true);
  EXPECT_EQ(spools_.Total(), 0);
  EXPECT_FALSE(fs::exists(Path("node2")));
}

TEST_F(StepSpoolsTest, AnUnreadableSpoolIsKeptAndNotReadAgainUntilNamedAgain) {
  Leave("node1");
  read_error_ = absl::DataLossError("line 2: not a step batch");
  spools_.Add(dir_.string(), {"r-1", 1, 1, "node1"});
  spools_.TryAll();
  spools_.TryAll();
  EXPECT_EQ(reads_, 1);
  EXPECT_TRUE(fs::exists(Path("node1")));
  read_error_ = absl::OkStatus();
  spools_.Add(dir_.string(), {"r-1", 1, 1, "node1"});
  AnswerAll(true);
  EXPECT_FALSE(fs::exists(Path("node1")));
}

}  // namespace
}  // namespace trellis::controller
