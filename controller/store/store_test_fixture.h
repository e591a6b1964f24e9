#pragma once
// The store's tests' fixture: a fresh SQLite store in a temporary directory,
// runs made on it, and step records stored as the step pipeline stores them.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/clock.h"
#include "controller/store/step_writer.h"
#include "controller/store/store.h"

namespace trellis::controller {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("store_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "trellis.db").string();
    auto s = Store::Open(path_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  RunRecord NewRun(const std::string& name) {
    auto r = store_->CreateRun(name, "alice", "[job]\nname='x'\n", 2, 1,
                               [](const std::string& id) { return "/out/" + id; }, clock_.Now());
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }

  // One rank's record, stored as the step pipeline stores it.
  absl::StatusOr<StepRow> RecordStep(const std::string& run_id, int attempt, int launch,
                                     int64_t step, double loss, int64_t tokens, double seconds) {
    if (!writer_) {
      auto w = StepWriter::Open(path_);
      if (!w.ok()) return w.status();
      writer_ = std::move(*w);
    }
    StepRecord rec;
    rec.step = step;
    rec.loss = loss;
    rec.tokens = tokens;
    rec.step_seconds = seconds;
    StepBatch b{{run_id, attempt, launch, "node1"}, ++seq_, {{0, rec}}};
    auto out = writer_->Commit({&b}, clock_.Now());
    if (!out.ok()) return out.status();
    return out->rows.at(0).row;
  }

  std::filesystem::path dir_;
  std::string path_;
  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<StepWriter> writer_;
  uint64_t seq_ = 0;
};

}  // namespace trellis::controller
