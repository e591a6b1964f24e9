#include "controller/core/certify.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

class CertifyTest : public ::testing::Test {
 protected:
  CertifyTest() { config_.certify_return = true; }
  QuarantineEntry Struck() {
    return Strike(std::nullopt, "node3", "probe failed", "{}", "gate", false, t0_, config_);
  }
  // The entry with a check started at `at`, ended if `passed` is given.
  static QuarantineEntry WithCheck(QuarantineEntry e, WallTime at,
                                   std::optional<bool> passed = std::nullopt) {
    e.last_check = NodeCheck{"42", at, std::nullopt, false, ""};
    if (passed) e.last_check = EndCheck(*e.last_check, *passed, "s", at + seconds(30));
    return e;
  }
  QuarantineConfig config_;  // 1 h base, 24 h probation, 600 s timeout
  WallTime t0_ = FakeClock().Now();
};

TEST_F(CertifyTest, ExpiryLeadsToCheckingNotProbation) {
  auto e = Struck();
  EXPECT_EQ(HealthAt(e, t0_ + hours(1) - seconds(1), config_), NodeHealth::kQuarantined);
  EXPECT_EQ(HealthAt(e, t0_ + hours(1), config_), NodeHealth::kChecking);
  EXPECT_EQ(HealthAt(e, t0_ + hours(500), config_), NodeHealth::kChecking);
  EXPECT_EQ(ExcludedNodes({e}, t0_ + hours(2), config_), std::vector<std::string>{"node3"});
  EXPECT_EQ(DecideCertify(e, t0_ + hours(2), config_, std::nullopt).action,
            CertifyAction::kSubmit);
  // Without certified return the old rule holds.
  QuarantineConfig off;
  EXPECT_EQ(HealthAt(e, t0_ + hours(2), off), NodeHealth::kProbation);
  EXPECT_EQ(DecideCertify(e, t0_ + hours(2), off, std::nullopt).action, CertifyAction::kNone);
}

TEST_F(CertifyTest, APassPutsTheNodeOnProbationWithItsStrikes) {
  auto start = t0_ + hours(1) + seconds(5);
  auto e = WithCheck(Struck(), start);
  EXPECT_TRUE(CheckInFlight(e));
  EXPECT_EQ(DecideCertify(e, start + seconds(10), config_, std::nullopt).action,
            CertifyAction::kNone);
  auto d = DecideCertify(e, start + seconds(30), config_, CheckResult{0, "ok\ncertify: passed\n"});
  EXPECT_EQ(d.action, CertifyAction::kPass);
  EXPECT_EQ(d.summary, "certify: passed");
  e.last_check = EndCheck(*e.last_check, true, d.summary, start + seconds(30));
  EXPECT_EQ(HealthAt(e, start + seconds(30), config_), NodeHealth::kProbation);
  EXPECT_TRUE(ExcludedNodes({e}, start + seconds(30), config_).empty());
  EXPECT_EQ(e.strikes, 1);
  // Probation counts from the pass, and then the strikes are forgiven.
  EXPECT_EQ(HealthAt(e, start + seconds(30) + hours(24), config_), NodeHealth::kOk);
}

TEST_F(CertifyTest, AFailIsAStrikeThatDoublesTheTimeOut) {
  auto start = t0_ + hours(1) + seconds(5);
  auto e = WithCheck(Struck(), start);
  auto d = DecideCertify(e, start + seconds(30), config_,
                         CheckResult{1, "{\"check\":\"numa\"}\ncertify: FAILED: numa: gone\n"});
  EXPECT_EQ(d.action, CertifyAction::kFail);
  EXPECT_EQ(d.summary, "exit 1: certify: FAILED: numa: gone");
  e.last_check = EndCheck(*e.last_check, false, d.summary, start + seconds(30));
  auto now = start + seconds(30);
  auto e2 = Strike(e, "node3", "check failed: " + d.summary, "{}", "certify", false, now, config_);
  EXPECT_EQ(e2.strikes, 2);
  EXPECT_EQ(*e2.expiry, now + hours(2));
  ASSERT_TRUE(e2.last_check);
  EXPECT_FALSE(e2.last_check->passed);  // `trellis nodes` still shows it
  EXPECT_EQ(HealthAt(e2, now + hours(1), config_), NodeHealth::kQuarantined);
  // The failed check started before the new expiry: a new one is due after it.
  EXPECT_EQ(HealthAt(e2, now + hours(2), config_), NodeHealth::kChecking);
  EXPECT_EQ(DecideCertify(e2, now + hours(2), config_, std::nullopt).action,
            CertifyAction::kSubmit);
}

TEST_F(CertifyTest, ACheckStartedBeforeTheExpiryDoesNotCount) {
  // Passed while the node was still struck (a check of an earlier expiry).
  auto e = WithCheck(Struck(), t0_ + hours(1) - seconds(60), true);
  EXPECT_FALSE(CheckInFlight(e));
  EXPECT_EQ(HealthAt(e, t0_ + hours(1) + seconds(1), config_), NodeHealth::kChecking);
  EXPECT_EQ(DecideCertify(e, t0_ + hours(1) + seconds(1), config_, std::nullopt).action,
            CertifyAction::kSubmit);
}

TEST_F(CertifyTest, ReleaseReturnsTheNodeAtOnceUnchecked) {
  auto e = Struck();
  auto r = Release(e, t0_ + hours(2), config_);  // while checking
  EXPECT_EQ(HealthAt(r, t0_ + hours(2), config_), NodeHealth::kProbation);
  EXPECT_EQ(DecideCertify(r, t0_ + hours(2), config_, std::nullopt).action,
            CertifyAction::kNone);
  auto early = Release(e, t0_ + seconds(1), config_);  // before the expiry
  EXPECT_EQ(HealthAt(early, t0_ + hours(2), config_), NodeHealth::kProbation);
}

TEST_F(CertifyTest, UntilReleasedIsNeverChecked) {
  auto e = Strike(std::nullopt, "n", "bad IB", "{}", "user:alice", true, t0_, config_);
  EXPECT_EQ(HealthAt(e, t0_ + hours(1000), config_), NodeHealth::kQuarantined);
  EXPECT_EQ(DecideCertify(e, t0_ + hours(1000), config_, std::nullopt).action,
            CertifyAction::kNone);
}

TEST_F(CertifyTest, NoResultWithinTheTimeoutFails) {
  auto start = t0_ + hours(1);
  auto e = WithCheck(Struck(), start);
  EXPECT_EQ(DecideCertify(e, start + seconds(599), config_, std::nullopt).action,
            CertifyAction::kNone);
  auto d = DecideCertify(e, start + seconds(600), config_, std::nullopt);
  EXPECT_EQ(d.action, CertifyAction::kTimedOut);
  EXPECT_NE(d.summary.find("600 s"), std::string::npos);
}

TEST(CheckResultTest, Parses) {
  auto r = ParseCheckResult("0\nline one\nline two\n\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(CheckSummary(*r), "line two");
  EXPECT_EQ(CheckSummary(*ParseCheckResult("3\n")), "exit 3: no output");
  auto bad = ParseCheckResult("ok\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("exit code 0..255, got 'ok'"), std::string::npos);
  EXPECT_FALSE(ParseCheckResult("").ok());
  EXPECT_FALSE(ParseCheckResult("256\n").ok());
  EXPECT_EQ(CheckSummary({0, std::string(300, 'x')}).size(), 200u);
}

TEST(NodeHealthTest, CheckingName) {
  EXPECT_STREQ(NodeHealthName(NodeHealth::kChecking), "checking");
}

}  // namespace
}  // namespace trellis::controller
