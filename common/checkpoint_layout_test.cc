#include "common/checkpoint_layout.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

namespace trellis {
namespace {

TEST(ParseCheckpointStepDir, AcceptsOnlyStepDigits) {
  EXPECT_EQ(ParseCheckpointStepDir("step-00000120"), 120);
  EXPECT_EQ(ParseCheckpointStepDir("step-0"), 0);
  EXPECT_EQ(ParseCheckpointStepDir("step-"), std::nullopt);
  EXPECT_EQ(ParseCheckpointStepDir("step-12x"), std::nullopt);
  EXPECT_EQ(ParseCheckpointStepDir("step--1"), std::nullopt);
  EXPECT_EQ(ParseCheckpointStepDir("steps-1"), std::nullopt);
  EXPECT_EQ(ParseCheckpointStepDir("step-1234567890123456789"), std::nullopt);
  EXPECT_EQ(ParseCheckpointStepDir("manifest.json"), std::nullopt);
}

class NewestCompleteCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trellis-ckpt-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  void Step(const std::string& name, bool manifest) {
    ASSERT_EQ(::mkdir((dir_ + "/" + name).c_str(), 0755), 0);
    if (manifest) std::ofstream(dir_ + "/" + name + "/manifest.json") << "{}";
  }
  std::string dir_;
};

TEST_F(NewestCompleteCheckpointTest, MissingOrEmptyDirIsFresh) {
  EXPECT_EQ(NewestCompleteCheckpoint(dir_ + "/absent"), -1);
  EXPECT_EQ(NewestCompleteCheckpoint(dir_), -1);
}

TEST_F(NewestCompleteCheckpointTest, NewestStepWithAManifestWins) {
  Step("step-00000100", true);
  Step("step-00000200", true);
  Step("step-00000300", false);  // crashed mid-save: not complete
  Step("step-junk", true);
  EXPECT_EQ(NewestCompleteCheckpoint(dir_), 200);
}

TEST_F(NewestCompleteCheckpointTest, CompleteStepsAreListedOldestFirst) {
  EXPECT_TRUE(CompleteCheckpoints(dir_ + "/absent").empty());
  Step("step-00000300", true);
  Step("step-00000100", true);
  Step("step-00000200", false);
  Step("step-junk", true);
  EXPECT_EQ(CompleteCheckpoints(dir_), (std::vector<int64_t>{100, 300}));
}

// A damaged step leaves the step namespace, kept beside it under a name no
// count or resume reads; a second one of the same step (set aside, written
// again, damaged again) is kept too.
TEST_F(NewestCompleteCheckpointTest, ASetAsideStepIsKeptButNoLongerCounts) {
  Step("step-00000020", true);
  Step("step-00000040", true);
  std::string error;
  EXPECT_EQ(SetAsideCheckpointStep(dir_, 40, &error), dir_ + "/damaged-step-00000040");
  EXPECT_EQ(error, "");
  EXPECT_EQ(CompleteCheckpoints(dir_), (std::vector<int64_t>{20}));
  std::ifstream kept(dir_ + "/damaged-step-00000040/manifest.json");
  EXPECT_TRUE(kept.good());
  Step("step-00000040", true);
  EXPECT_EQ(SetAsideCheckpointStep(dir_, 40, &error), dir_ + "/damaged-step-00000040.2");
  EXPECT_EQ(NewestCompleteCheckpoint(dir_), 20);
  EXPECT_EQ(SetAsideCheckpointStep(dir_, 60, &error), "");
  EXPECT_NE(error.find("cannot rename " + dir_ + "/step-00000060 to "), std::string::npos)
      << error;
  EXPECT_NE(error.find("No such file or directory"), std::string::npos) << error;
}

TEST(DescribeSteps, ListsTheNewestAndCountsTheRest) {
  EXPECT_EQ(DescribeSteps({}), "none");
  EXPECT_EQ(DescribeSteps({2, 4, 6}), "2, 4, 6");
  EXPECT_EQ(DescribeSteps({5, 10, 15, 20, 25}, 3), "..., 15, 20, 25 (5 in all)");
  EXPECT_EQ(DescribeSteps({5, 10, 15}, 3), "5, 10, 15");
}

}  // namespace
}  // namespace trellis
