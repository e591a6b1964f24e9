#include "controller/core/quarantine.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

using std::chrono::hours;

class QuarantineTest : public ::testing::Test {
 protected:
  QuarantineConfig config_;  // 1 h base, 24 h probation
  WallTime t0_ = FakeClock().Now();
};

TEST_F(QuarantineTest, FirstStrikeQuarantinesForTheBaseDuration) {
  auto e = Strike(std::nullopt, "node3", "socket 0: 72.7 GiB free < 100.0 GiB required", "{}",
                  "gate", false, t0_, config_);
  EXPECT_EQ(e.strikes, 1);
  EXPECT_EQ(*e.expiry, t0_ + hours(1));
  EXPECT_EQ(HealthAt(e, t0_ + hours(1) - std::chrono::seconds(1), config_),
            NodeHealth::kQuarantined);
  EXPECT_EQ(HealthAt(e, t0_ + hours(1), config_), NodeHealth::kProbation);
  EXPECT_EQ(HealthAt(e, t0_ + hours(25), config_), NodeHealth::kOk);
  EXPECT_EQ(ExcludedNodes({e}, t0_, config_), std::vector<std::string>{"node3"});
  EXPECT_TRUE(ExcludedNodes({e}, t0_ + hours(2), config_).empty());
}

TEST_F(QuarantineTest, AStrikeOnProbationDoublesTheTime) {
  auto e1 = Strike(std::nullopt, "n", "r1", "{}", "gate", false, t0_, config_);
  auto t1 = t0_ + hours(2);  // expired: probation
  auto e2 = Strike(e1, "n", "r2", "{}", "gate", false, t1, config_);
  EXPECT_EQ(e2.strikes, 2);
  EXPECT_EQ(*e2.expiry, t1 + hours(2));
  auto e3 = Strike(e2, "n", "r3", "{}", "gate", false, t1 + hours(3), config_);
  EXPECT_EQ(*e3.expiry, t1 + hours(3) + hours(4));
  // After a quiet probation the strikes are forgiven.
  auto later = *e3.expiry + hours(25);
  EXPECT_EQ(HealthAt(e3, later, config_), NodeHealth::kOk);
  EXPECT_EQ(Strike(e3, "n", "r4", "{}", "gate", false, later, config_).strikes, 1);
}

TEST_F(QuarantineTest, DurationIsCapped) {
  std::optional<QuarantineEntry> e;
  WallTime t = t0_;
  for (int i = 0; i < 12; ++i) {
    e = Strike(e, "n", "r", "{}", "gate", false, t, config_);
    t = *e->expiry;
  }
  EXPECT_LE(*e->expiry - e->since, config_.max_duration);
}

TEST_F(QuarantineTest, UserQuarantineLastsUntilReleasedThenProbation) {
  auto e = Strike(std::nullopt, "n", "flaky IB link", "{}", "user:alice", true, t0_, config_);
  EXPECT_FALSE(e.expiry.has_value());
  EXPECT_EQ(HealthAt(e, t0_ + hours(1000), config_), NodeHealth::kQuarantined);
  auto r = Release(e, t0_ + hours(5), config_);
  EXPECT_EQ(HealthAt(r, t0_ + hours(5), config_), NodeHealth::kProbation);
  EXPECT_EQ(r.strikes, 1);
  EXPECT_TRUE(ExcludedNodes({r}, t0_ + hours(5), config_).empty());
}

TEST(NodeHealthTest, Names) {
  EXPECT_STREQ(NodeHealthName(NodeHealth::kQuarantined), "quarantined");
  EXPECT_STREQ(NodeHealthName(NodeHealth::kProbation), "probation");
  EXPECT_STREQ(NodeHealthName(NodeHealth::kOk), "ok");
}

}  // namespace
}  // namespace trellis::controller
