#include "controller/shell/lease.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace trellis::controller {
namespace {

namespace fs = std::filesystem;

LeaseHolder Holder(const std::string& host, int64_t pid, int64_t renewed, int64_t ttl = 15) {
  return {host, pid, "token-" + host, "1.0", renewed - 100, renewed, ttl};
}

TEST(LeaseRulesTest, FormatAndParseRoundTripAndRefuseWhatIsNotALease) {
  LeaseHolder h = Holder("login1", 42, 1000);
  auto back = ParseLease(FormatLease(h));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->host, "login1");
  EXPECT_EQ(back->pid, 42);
  EXPECT_EQ(back->token, "token-login1");
  EXPECT_EQ(back->renewed_unix, 1000);
  EXPECT_EQ(back->ttl_s, 15);
  EXPECT_FALSE(ParseLease("").ok());
  EXPECT_FALSE(ParseLease(R"({"host": "a"})").ok());
  h.ttl_s = 0;
  EXPECT_FALSE(ParseLease(FormatLease(h)).ok());
}

TEST(LeaseRulesTest, JudgesByTheHoldersPidOnThisHostAndByItsAgeElsewhere) {
  const int64_t now = 10000;
  EXPECT_EQ(JudgeLease({}, "me", now), LeaseVerdict::kFree);
  // This host: live only while its pid is and it renews.
  EXPECT_EQ(JudgeLease({true, Holder("me", 7, now - 3), true}, "me", now), LeaseVerdict::kLive);
  EXPECT_EQ(JudgeLease({true, Holder("me", 7, now - 3), false}, "me", now), LeaseVerdict::kStale);
  EXPECT_EQ(JudgeLease({true, Holder("me", 7, now - 20), true}, "me", now), LeaseVerdict::kStale)
      << "a pid alive that does not renew: hung, or reused after a reboot";
  // Elsewhere: another clock; an expired-looking lease is watched, not taken.
  EXPECT_EQ(JudgeLease({true, Holder("login2", 7, now - 3), false}, "me", now),
            LeaseVerdict::kLive);
  EXPECT_EQ(JudgeLease({true, Holder("login2", 7, now + 30), false}, "me", now),
            LeaseVerdict::kLive) << "its clock ahead of ours";
  EXPECT_EQ(JudgeLease({true, Holder("login2", 7, now - 15), false}, "me", now),
            LeaseVerdict::kWatch);
  EXPECT_EQ(JudgeLease({true, std::nullopt, false}, "me", now), LeaseVerdict::kWatch);
}

class StateLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lease-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  LeaseOptions Options(const std::string& host, int ttl_s = 3) {
    return {dir_ + "/controller.lease", host, "1.0", std::chrono::seconds(ttl_s),
            std::chrono::milliseconds(50)};
  }
  std::string FileText() {
    std::ifstream in(dir_ + "/controller.lease");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string dir_;
};

TEST_F(StateLeaseTest, ASecondControllerIsRefusedNamingTheHolderUntilTheFirstLetsGo) {
  std::string said;
  auto first = StateLease::Acquire(Options("login1"), &said);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_NE(said.find("free"), std::string::npos) << said;
  EXPECT_TRUE((*first)->Held());
  // Same host, a live pid (this test's) that renews: refused at once.
  auto second = StateLease::Acquire(Options("login1"), &said);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(second.status())) << second.status();
  EXPECT_NE(second.status().message().find("host login1, pid " + std::to_string(getpid())),
            std::string::npos)
      << second.status();
  first->reset();  // a clean stop removes the file
  EXPECT_FALSE(fs::exists(dir_ + "/controller.lease"));
  auto third = StateLease::Acquire(Options("login1"), &said);
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST_F(StateLeaseTest, ALeaseLeftByAGoneHolderElsewhereIsWatchedThenTakenOver) {
  const int64_t long_ago = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count() -
                           60;
  std::ofstream(dir_ + "/controller.lease") << FormatLease(Holder("login2", 99, long_ago, 3));
  std::string said, waited;
  const auto t0 = std::chrono::steady_clock::now();
  auto taken = StateLease::Acquire(Options("login1"), &said,
                                   [&](const std::string& w) { waited = w; });
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3)) << "watched a ttl";
  EXPECT_NE(waited.find("host login2"), std::string::npos) << waited;
  EXPECT_NE(said.find("taken over from host login2, pid 99"), std::string::npos) << said;
  EXPECT_NE(FileText().find("\"login1\""), std::string::npos);
  // Written as renewed now, not when the watch began: a third controller on
  // this host finds it live.
  auto third = StateLease::Acquire(Options("login1"), &said);
  EXPECT_FALSE(third.ok()) << said;
}

TEST_F(StateLeaseTest, AHolderThatStillRenewsElsewhereIsNotTakenDespiteAClockBehind) {
  // Its clock is 60 s behind ours, so its lease looks expired; it renews.
  const int64_t behind = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count() -
                         60;
  std::ofstream(dir_ + "/controller.lease") << FormatLease(Holder("login2", 99, behind, 3));
  std::thread renewer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    std::ofstream(dir_ + "/controller.lease") << FormatLease(Holder("login2", 99, behind + 1, 3));
  });
  std::string said;
  auto taken = StateLease::Acquire(Options("login1"), &said);
  renewer.join();
  ASSERT_FALSE(taken.ok()) << said;
  EXPECT_NE(taken.status().message().find("host login2"), std::string::npos) << taken.status();
}

TEST_F(StateLeaseTest, AControllerWhoseLeaseWasTakenStopsWriting) {
  std::string said;
  auto mine = StateLease::Acquire(Options("login1"), &said);
  ASSERT_TRUE(mine.ok()) << mine.status();
  std::atomic<bool> told{false};
  std::string why;
  (*mine)->StartRenewing([&](const std::string& w) {
    why = w;
    told = true;
  });
  EXPECT_TRUE((*mine)->Held());
  // A successor (its holder judged gone) wrote its own lease.
  std::ofstream(dir_ + "/controller.lease") << FormatLease(Holder("login2", 5, 1 << 30, 3));
  for (int i = 0; i < 40 && !told; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(told);
  EXPECT_FALSE((*mine)->Held());
  EXPECT_NE(why.find("host login2"), std::string::npos) << why;
  mine->reset();
  EXPECT_NE(FileText().find("login2"), std::string::npos) << "the successor's lease is left";
}

TEST_F(StateLeaseTest, RenewingKeepsItHeldPastTheTtl) {
  std::string said;
  auto mine = StateLease::Acquire(Options("login1"), &said);
  ASSERT_TRUE(mine.ok()) << mine.status();
  (*mine)->StartRenewing(nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  EXPECT_TRUE((*mine)->Held());
  EXPECT_FALSE((*mine)->lost());
}

TEST_F(StateLeaseTest, WithoutRenewingTheWritesStopBeforeTheTtl) {
  std::string said;
  auto mine = StateLease::Acquire(Options("login1"), &said);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_TRUE((*mine)->Held());
  std::this_thread::sleep_for(std::chrono::milliseconds(2800));  // ttl 3 s less its margin
  EXPECT_FALSE((*mine)->Held());
}

}  // namespace
}  // namespace trellis::controller
