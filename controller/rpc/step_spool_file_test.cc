// A worker's step spool read back: what a worker writes (one StepBatch as
// JSON per line, worker/rpc/step_spool_file.cc) reads as batches of its
// source; anything else is refused, naming the path and the line.
#include "controller/rpc/step_spool_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/run_layout.h"

namespace trellis::controller {
namespace {

namespace fs = std::filesystem;

class StepSpoolFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("step_spool_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "attempt-1" / "launch-2");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path() const { return StepSpoolPath(dir_.string(), 1, 2, "node3"); }
  void Write(const std::string& text) const { std::ofstream(Path()) << text; }
  const BatchSource source_{"r-1", 1, 2, "node3"};
  fs::path dir_;
};

TEST_F(StepSpoolFileTest, TheWorkersBatchesReadBackWithTheirNumbers) {
  Write(R"({"seq":"4","steps":[{"rank":0,"record":{"step":"7","loss":2.5}},)"
        R"({"rank":1,"record":{"step":"7","loss":2.25}}]})"
        "\n"
        R"({"seq":"5","steps":[{"rank":0,"record":{"step":"8","loss":2.0}}]})"
        "\n");
  auto batches = ReadStepSpoolFile(Path(), source_);
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 2u);
  EXPECT_EQ((*batches)[0].source.node, "node3");
  EXPECT_EQ((*batches)[0].seq, 4u);
  ASSERT_EQ((*batches)[0].records.size(), 2u);
  EXPECT_EQ((*batches)[0].records[1].rank, 1);
  EXPECT_EQ((*batches)[0].records[1].record.step, 7);
  EXPECT_DOUBLE_EQ((*batches)[0].records[1].record.loss, 2.25);
  EXPECT_EQ((*batches)[1].seq, 5u);
}

TEST_F(StepSpoolFileTest, NoneIsNotFoundAndAnythingElseNamesThePathAndLine) {
  EXPECT_TRUE(absl::IsNotFound(ReadStepSpoolFile(Path(), source_).status()));
  auto refused = [&](const std::string& text, const std::string& why) {
    Write(text);
    auto r = ReadStepSpoolFile(Path(), source_);
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_NE(r.status().message().find(Path() + " line 2"), std::string::npos)
        << why << ": " << r.status();
  };
  const std::string good = R"({"seq":"1","steps":[{"rank":0,"record":{"step":"1","loss":1}}]})";
  refused(good + "\n{not json\n", "not JSON");
  refused(good + "\n" + R"({"seq":"0","steps":[{"rank":0,"record":{"step":"1","loss":1}}]})",
          "batch number 0");
  refused(good + "\n" + R"({"seq":"2","steps":[]})", "an empty batch");
}

}  // namespace
}  // namespace trellis::controller
