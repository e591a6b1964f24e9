#include "worker/core/outcome.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

namespace trellis::worker {
namespace {

TEST(RankExitTest, FromWaitStatus) {
  // W_EXITCODE builds the status waitpid() reports.
  RankExit exited = RankExitFromWaitStatus(3, W_EXITCODE(7, 0));
  EXPECT_EQ(exited.rank, 3);
  EXPECT_EQ(exited.exit_code, 7);
  EXPECT_EQ(exited.signal, 0);
  RankExit killed = RankExitFromWaitStatus(1, W_EXITCODE(0, SIGKILL));
  EXPECT_EQ(killed.exit_code, 137);
  EXPECT_EQ(killed.signal, SIGKILL);
  EXPECT_EQ(DescribeRankExit(killed), "was killed by signal 9 (SIGKILL)");
  // Killed by the warning itself: the rank's author learns what to fix.
  EXPECT_EQ(DescribeRankExit(RankExitFromWaitStatus(2, W_EXITCODE(0, SIGUSR1))),
            "was killed by signal 10 (SIGUSR1), the wall-time warning, which a rank must handle "
            "until it is gone (README, \"Time limits\")");
}

struct OutcomeCase {
  const char* name;
  std::vector<RankExit> exits;
  int expected_ranks;
  std::string stop_cause;
  int exit_code;
  std::string reason;
};

void PrintTo(const OutcomeCase& c, std::ostream* os) { *os << c.name; }

class OutcomeTest : public ::testing::TestWithParam<OutcomeCase> {};

TEST_P(OutcomeTest, Decides) {
  const OutcomeCase& c = GetParam();
  WorkerOutcome o = DecideOutcome(c.exits, c.expected_ranks, c.stop_cause);
  EXPECT_EQ(o.exit_code, c.exit_code);
  EXPECT_EQ(o.reason, c.reason);
}

INSTANTIATE_TEST_SUITE_P(
    Table, OutcomeTest,
    ::testing::Values(
        OutcomeCase{"AllZero", {{2, 0, 0}, {3, 0, 0}}, 2, "", 0, "all 2 ranks exited 0"},
        OutcomeCase{"OneRank", {{0, 0, 0}}, 1, "", 0, "all 1 rank exited 0"},
        OutcomeCase{
            "FirstFailureWins", {{3, 3, 0}, {2, 143, 15}}, 2, "", 3, "rank 3 exited with 3"},
        OutcomeCase{"ZeroThenFailure", {{2, 0, 0}, {3, 1, 0}}, 2, "", 1, "rank 3 exited with 1"},
        OutcomeCase{"Signal", {{0, 137, 9}}, 1, "", 137, "rank 0 was killed by signal 9 (SIGKILL)"},
        OutcomeCase{"CannotStart",
                    {{1, 127, 0}, {0, 143, 15}},
                    2,
                    "",
                    127,
                    "rank 1 could not be started (127)"},
        OutcomeCase{"Stopped",
                    {{0, 143, 15}, {1, 143, 15}},
                    2,
                    "worker received SIGTERM",
                    143,
                    "rank 0 was killed by signal 15 (SIGTERM) (worker received SIGTERM)"},
        OutcomeCase{"StoppedCleanly",
                    {{0, 0, 0}},
                    1,
                    "worker received SIGTERM",
                    0,
                    "all 1 rank exited 0 (worker received SIGTERM)"},
        OutcomeCase{"MissingExits", {{0, 0, 0}}, 2, "", 1, "only 1 of 2 ranks reported an exit"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace trellis::worker
