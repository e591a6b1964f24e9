#include "controller/core/progress.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

using std::chrono::seconds;

const SteadyTime t0{};  // the launch started

RankProgress R(int rank, const std::string& node, int64_t step, int changed_at_s) {
  RankProgress p;
  p.rank = rank;
  p.node = node;
  p.last_step = step;
  p.last_change = t0 + seconds(changed_at_s);
  return p;
}

struct HangCase {
  const char* name;
  std::vector<RankProgress> ranks;
  int now_s;
  std::optional<int> hung_rank;
  std::string node;
  int64_t last_step;
  double silent_s;
  bool before_first_step;
};

TEST(FindHangTest, Table) {
  // hang_timeout 60 s, startup_timeout 900 s.
  const HangCase cases[] = {
      {"all stepping",
       {R(0, "n1", 20, 995), R(1, "n1", 20, 996)},
       1000,
       std::nullopt,
       "",
       0,
       0,
       false},
      {"one rank silent for the hang timeout",
       {R(0, "n1", 20, 995), R(1, "n2", 17, 940)},
       1000,
       1,
       "n2",
       17,
       60,
       false},
      {"just under the timeout", {R(0, "n1", 17, 941)}, 1000, std::nullopt, "", 0, 0, false},
      {"the rank silent longest",
       {R(0, "n1", 17, 930), R(1, "n1", 16, 900), R(2, "n2", 17, 935)},
       1000,
       1,
       "n1",
       16,
       100,
       false},
      {"ties: the lowest rank",
       {R(3, "n2", 17, 900), R(2, "n2", 17, 900), R(1, "n1", 18, 990)},
       1000,
       2,
       "n2",
       17,
       100,
       false},
      {"no step yet, within the startup timeout",
       {R(0, "n1", -1, 0), R(1, "n1", 5, 898)},
       899,
       std::nullopt,
       "",
       0,
       0,
       false},
      {"no step yet, past the startup timeout",
       {R(0, "n1", 3, 899), R(1, "n2", -1, 0)},
       905,
       1,
       "n2",
       -1,
       905,
       true},
      {"a started rank hangs while another is still starting",
       {R(0, "n1", 2, 100), R(1, "n2", -1, 0)},
       899,
       0,
       "n1",
       2,
       799,
       false},
      {"no ranks", {}, 5000, std::nullopt, "", 0, 0, false},
  };
  for (const auto& c : cases) {
    auto h = FindHang(c.ranks, t0, t0 + seconds(c.now_s), seconds(60), seconds(900));
    ASSERT_EQ(h.has_value(), c.hung_rank.has_value()) << c.name;
    if (!h) continue;
    EXPECT_EQ(h->rank, *c.hung_rank) << c.name;
    EXPECT_EQ(h->node, c.node) << c.name;
    EXPECT_EQ(h->last_step, c.last_step) << c.name;
    EXPECT_DOUBLE_EQ(h->silent_s, c.silent_s) << c.name;
    EXPECT_EQ(h->before_first_step, c.before_first_step) << c.name;
  }
}

// In lockstep every rank stops at one step: a rank whose process is stopped
// (or stuck in the kernel) is the culprit; with none, nothing says which.
TEST(FindHangTest, AStoppedProcessIsTheCulpritOfALockstepHang) {
  const SteadyTime t0{};
  auto rank = [&](int r, const char* node, int at_s, char state) {
    RankProgress p = R(r, node, 7, at_s);
    p.process_state = state;
    return p;
  };
  // Rank 0's record came first: silent longest. Rank 1 was stopped.
  auto h = FindHang({rank(0, "n1", 10, 'S'), rank(1, "n1", 11, 'T'), rank(2, "n2", 11, 'R')}, t0,
                    t0 + seconds(100), seconds(60), seconds(900));
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->rank, 1);
  EXPECT_EQ(h->process_state, 'T');
  EXPECT_FALSE(h->culprit_unknown);
  h = FindHang({rank(0, "n1", 10, 'S'), rank(1, "n1", 11, 0), rank(2, "n2", 11, 'D')}, t0,
               t0 + seconds(100), seconds(60), seconds(900));
  EXPECT_EQ(h->rank, 2) << "waiting in the kernel holds the others too";
  h = FindHang({rank(0, "n1", 10, 'S'), rank(1, "n1", 11, 'R'), rank(2, "n2", 11, 0)}, t0,
               t0 + seconds(100), seconds(60), seconds(900));
  EXPECT_EQ(h->rank, 0);
  EXPECT_TRUE(h->culprit_unknown) << "all at step 7, none stopped";
  RankProgress ahead = rank(2, "n2", 11, 0);
  ahead.last_step = 8;
  h = FindHang({rank(0, "n1", 10, 'S'), rank(1, "n1", 11, 'R'), ahead}, t0, t0 + seconds(100),
               seconds(60), seconds(900));
  EXPECT_FALSE(h->culprit_unknown) << "rank 2 got further: the others stopped first";
}

// A rank with its own (learned) timeout is held to it, not to the argument's;
// the evidence says which timeout held.
TEST(FindHangTest, ARanksOwnTimeoutHoldsOverTheArgument) {
  const SteadyTime t0{};
  RankProgress fast = R(0, "n1", 10, 100);
  fast.timeout = std::chrono::milliseconds(6500);
  RankProgress plain = R(1, "n2", 10, 100);
  auto h = FindHang({fast, plain}, t0, t0 + seconds(106), seconds(60), seconds(900));
  EXPECT_FALSE(h.has_value());
  h = FindHang({fast, plain}, t0, t0 + seconds(107), seconds(60), seconds(900));
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->rank, 0);
  EXPECT_DOUBLE_EQ(h->timeout_s, 6.5);
  h = FindHang({plain}, t0, t0 + seconds(160), seconds(60), seconds(900));
  ASSERT_TRUE(h.has_value());
  EXPECT_DOUBLE_EQ(h->timeout_s, 60);
}

TEST(FindLostWorkersTest, SilentForTheTimeoutInNaturalOrder) {
  std::map<std::string, SteadyTime> heard = {{"node10", t0},
                                             {"node2", t0 + seconds(1)},
                                             {"node3", t0 + seconds(20)},
                                             {"node1", t0 + seconds(29)}};
  SteadyTime now = t0 + seconds(31);
  EXPECT_EQ(FindLostWorkers(heard, now, seconds(30)),
            (std::vector<std::string>{"node2", "node10"}));
  EXPECT_EQ(FindLostWorkers(heard, now, seconds(11)),
            (std::vector<std::string>{"node2", "node3", "node10"}));
  EXPECT_TRUE(FindLostWorkers(heard, now, seconds(32)).empty());
  EXPECT_TRUE(FindLostWorkers({}, now, seconds(1)).empty());
}

}  // namespace
}  // namespace trellis::controller
