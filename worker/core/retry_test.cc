#include "worker/core/retry.h"

#include <gtest/gtest.h>

namespace trellis::worker {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, GrowsAndCaps) {
  BackoffPolicy p{milliseconds(100), milliseconds(1000), 2.0, 0.0};
  EXPECT_EQ(BackoffDelay(p, 0, 0.5), milliseconds(100));
  EXPECT_EQ(BackoffDelay(p, 1, 0.5), milliseconds(200));
  EXPECT_EQ(BackoffDelay(p, 3, 0.5), milliseconds(800));
  EXPECT_EQ(BackoffDelay(p, 4, 0.5), milliseconds(1000));
  EXPECT_EQ(BackoffDelay(p, 1000, 0.5), milliseconds(1000));
}

TEST(BackoffTest, JitterBounds) {
  BackoffPolicy p{milliseconds(1000), milliseconds(1000), 2.0, 0.2};
  EXPECT_EQ(BackoffDelay(p, 0, 0.0), milliseconds(800));
  EXPECT_EQ(BackoffDelay(p, 0, 0.5), milliseconds(1000));
  EXPECT_EQ(BackoffDelay(p, 0, 1.0), milliseconds(1200));
}

struct LineCase {
  const char* name;
  NextLaunchChoice choice;
  std::string line;
};

void PrintTo(const LineCase& c, std::ostream* os) { *os << c.name; }

class NextLaunchLineTest : public ::testing::TestWithParam<LineCase> {};

TEST_P(NextLaunchLineTest, Formats) {
  EXPECT_EQ(FormatNextLaunchLine(GetParam().choice, 9), GetParam().line);
}

INSTANTIATE_TEST_SUITE_P(
    Table, NextLaunchLineTest,
    ::testing::Values(
        LineCase{"RelaunchEverywhere", {true, 2, {}, 0}, "relaunch 2 -"},
        LineCase{"RelaunchOnNodes", {true, 3, {"node1", "node4"}, 0}, "relaunch 3 node1,node4"},
        LineCase{"HostlistSyntaxFallsBack", {true, 3, {"node[1-2]"}, 0}, "exit 9"},
        LineCase{"Exit", {false, 0, {}, 3}, "exit 3"},
        LineCase{"ExitZero", {false, 0, {}, 0}, "exit 0"},
        LineCase{"BadLaunchFallsBack", {true, 0, {}, 0}, "exit 9"},
        LineCase{"OddNodeFallsBack", {true, 2, {"a b"}, 0}, "exit 9"},
        LineCase{"BadCodeFallsBack", {false, 0, {}, 300}, "exit 9"},
        LineCase{"RelaunchWithPoolJobs",
                 {true, 4, {"node2"}, 0, {{"77", {"node9"}}, {"78", {"node10", "node11"}}}},
                 "relaunch 4 node2 77:node9 78:node10,node11"},
        LineCase{"RelaunchOnPoolNodesOnly", {true, 5, {}, 0, {{"78", {"node10"}}}},
                 "relaunch 5 none 78:node10"},
        LineCase{"OddJobIdFallsBack", {true, 4, {"node2"}, 0, {{"77;rm", {"node9"}}}}, "exit 9"},
        LineCase{"PoolJobWithoutNodesFallsBack", {true, 4, {"node2"}, 0, {{"77", {}}}}, "exit 9"},
        LineCase{"OddPoolNodeFallsBack", {true, 4, {"node2"}, 0, {{"77", {"a:b"}}}}, "exit 9"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace trellis::worker
