#include "worker/io/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/log_times.h"
#include "worker/testing/run_until.h"

namespace trellis::worker {
namespace {

using namespace std::chrono_literals;
using testing::RunUntil;

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trellis-supervisor-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<RankPlan> Plans(int n) {
    std::vector<RankPlan> plans;
    for (int i = 0; i < n; ++i) {
      RankPlan p;
      p.local_rank = i;
      p.global_rank = 10 + i;
      p.log_path = dir_ + "/logs/rank-" + std::to_string(p.global_rank) + ".log";
      p.env = {{"PATH", "/usr/bin:/bin"}, {"RANK", std::to_string(p.global_rank)}};
      plans.push_back(p);
    }
    return plans;
  }

  // Runs `script` (sh) as 2 ranks (10 and 11) until all have exited.
  void Run(const std::string& script, std::chrono::steady_clock::duration grace,
           const std::function<void(Supervisor&)>& after_start = nullptr) {
    Supervisor s(
        io_, clock_, grace, [&](const RankExit& e) { streamed_.push_back(e); },
        [&] { all_exited_ = true; });
    s.Start(Plans(2), {"/bin/sh", "-c", script}, dir_);
    if (after_start) after_start(s);
    ASSERT_TRUE(RunUntil(
        io_, [&] { return all_exited_; }, 20s));
    exits_ = s.exits();
    outcome_ = DecideOutcome(s.exits(), s.expected(), s.stop_cause());
  }

  bool Exists(const std::string& name) { return std::filesystem::exists(dir_ + "/" + name); }
  std::string Log(int rank) {
    std::ifstream in(dir_ + "/logs/rank-" + std::to_string(rank) + ".log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  boost::asio::io_context io_;
  // Never advanced unless a test says so: no grace runs out by itself.
  FakeClock clock_;
  std::string dir_;
  bool all_exited_ = false;
  std::vector<RankExit> streamed_;
  std::vector<RankExit> exits_;
  WorkerOutcome outcome_;
};

TEST_F(SupervisorTest, AllExitZeroWithLogsInTheWorkingDir) {
  Run("echo \"rank $RANK in $(pwd)\"; echo to-stderr >&2", 10s);
  EXPECT_EQ(outcome_.exit_code, 0);
  EXPECT_EQ(outcome_.reason, "all 2 ranks exited 0");
  EXPECT_EQ(streamed_.size(), 2u);
  for (const RankExit& e : streamed_) EXPECT_EQ(e.evidence, "");  // only failures carry it
  EXPECT_NE(Log(10).find("rank 10 in " + dir_), std::string::npos) << Log(10);
  EXPECT_NE(Log(11).find("to-stderr"), std::string::npos);
}

TEST_F(SupervisorTest, FailingRankStopsTheOtherWithSigterm) {
  Run("if [ \"$RANK\" = 11 ]; then exit 3; fi; exec sleep 60", 30s);
  // The grace never ran out (the clock stood still): SIGTERM ended the sleeper.
  EXPECT_EQ(outcome_.exit_code, 3);
  EXPECT_EQ(outcome_.reason, "rank 11 exited with 3");
  ASSERT_EQ(exits_.size(), 2u);
  EXPECT_EQ(exits_[1].rank, 10);
  EXPECT_EQ(exits_[1].signal, SIGTERM);
  EXPECT_EQ(exits_[1].exit_code, 143);
  // The cause is not flagged; the rank stopped because of it is.
  EXPECT_FALSE(exits_[0].after_stop);
  EXPECT_TRUE(exits_[1].after_stop);
}

TEST_F(SupervisorTest, FailedRankCarriesTheMarkersOfItsLogTail) {
  // Rank 11 fails once rank 10 has written its line.
  Run("if [ \"$RANK\" = 11 ]; then while [ ! -e ready ]; do sleep 0.01; done; "
      "echo 'step 3 loss 2.5'; "
      "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2; "
      "echo 'cleaning up'; exit 1; fi; echo 'rank 10 waiting'; touch ready; exec sleep 60",
      30s);
  ASSERT_EQ(exits_.size(), 2u);
  ASSERT_EQ(streamed_.size(), 2u);
  EXPECT_EQ(exits_[0].rank, 11);
  EXPECT_EQ(exits_[0].markers, std::vector<std::string>{"device_oom"});
  EXPECT_EQ(exits_[0].evidence,
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB");
  // The stream reports the same exit.
  EXPECT_EQ(streamed_[0].markers, exits_[0].markers);
  EXPECT_EQ(streamed_[0].evidence, exits_[0].evidence);
  // The rank stopped with SIGTERM: no marker, its last line.
  EXPECT_EQ(exits_[1].rank, 10);
  EXPECT_TRUE(exits_[1].markers.empty());
  EXPECT_EQ(exits_[1].evidence, "rank 10 waiting");
}

TEST_F(SupervisorTest, RankIgnoringSigtermIsKilledOnceTheClockPassesTheGrace) {
  // Rank 11 fails only once rank 10 ignores SIGTERM, so the test does not
  // depend on which shell gets scheduled first.
  Supervisor s(
      io_, clock_, 30s, [&](const RankExit& e) { streamed_.push_back(e); },
      [&] { all_exited_ = true; });
  s.Start(Plans(2),
          {"/bin/sh", "-c",
           "if [ \"$RANK\" = 11 ]; then while [ ! -e ignoring ]; do sleep 0.01; done; exit 4; "
           "fi; trap '' TERM; touch ignoring; exec sleep 60"},
          dir_);
  // Rank 11's exit started the grace: SIGTERM went to rank 10, which ignores it.
  // Two timers: the grace and the next note of the logs' times.
  ASSERT_TRUE(RunUntil(io_, [&] { return streamed_.size() == 1; }));
  EXPECT_EQ(clock_.PendingTimers(), 2);
  clock_.Advance(29s);
  io_.restart();
  io_.poll();
  EXPECT_EQ(s.alive(), 1);
  EXPECT_EQ(clock_.PendingTimers(), 2);  // the grace is not over
  clock_.Advance(1s);
  ASSERT_TRUE(RunUntil(io_, [&] { return all_exited_; }));
  ASSERT_EQ(s.exits().size(), 2u);
  EXPECT_EQ(s.exits()[1].rank, 10);
  EXPECT_EQ(s.exits()[1].signal, SIGKILL);
  EXPECT_EQ(DecideOutcome(s.exits(), s.expected(), s.stop_cause()).exit_code, 4);
}

TEST_F(SupervisorTest, StopTerminatesEveryRank) {
  Run("touch ready-$RANK; exec sleep 60", 10s, [&](Supervisor& s) {
    ASSERT_TRUE(RunUntil(io_, [&] { return Exists("ready-10") && Exists("ready-11"); }));
    s.Stop("worker received SIGTERM");
  });
  EXPECT_EQ(outcome_.exit_code, 143);
  EXPECT_NE(outcome_.reason.find("was killed by signal 15 (SIGTERM) (worker received SIGTERM)"),
            std::string::npos)
      << outcome_.reason;
}

TEST_F(SupervisorTest, ForwardReachesTheRanks) {
  Run("trap 'echo got-usr1; exit 0' USR1; touch ready-$RANK; "
      "while :; do sleep 0.05; done",
      10s, [&](Supervisor& s) {
        ASSERT_TRUE(RunUntil(io_, [&] { return Exists("ready-10") && Exists("ready-11"); }));
        s.Forward(SIGUSR1);
      });
  EXPECT_EQ(outcome_.exit_code, 0);
  EXPECT_NE(Log(10).find("got-usr1"), std::string::npos);
  EXPECT_NE(Log(11).find("got-usr1"), std::string::npos);
}

// Each log's growth is noted in <log>.times (common/log_times.h): once a
// second while its rank lives, and when it ends.
TEST_F(SupervisorTest, TheLogsGrowthIsNotedWhileTheRankRunsAndAtItsEnd) {
  Supervisor s(
      io_, clock_, 10s, [&](const RankExit& e) { streamed_.push_back(e); },
      [&] { all_exited_ = true; });
  s.Start(Plans(1), {"/bin/sh", "-c",
                     "echo first; touch ready; while [ ! -e go ]; do sleep 0.01; done; "
                     "echo second line"},
          dir_);
  ASSERT_TRUE(RunUntil(io_, [&] { return Exists("ready"); }));
  clock_.Advance(1s);  // the note of the second
  io_.restart();
  io_.poll();
  std::ofstream(dir_ + "/go").put('\n');
  ASSERT_TRUE(RunUntil(io_, [&] { return all_exited_; }));
  std::ifstream in(dir_ + "/logs/rank-10.log.times");
  std::stringstream text;
  text << in.rdbuf();
  const auto notes = ParseLogTimeNotes(text.str());
  ASSERT_EQ(notes.size(), 2u) << text.str();
  EXPECT_EQ(notes[0].bytes, 6u);                      // "first\n"
  EXPECT_EQ(notes[1].bytes, 6u + 12u);                // and "second line\n", at the end
  EXPECT_LE(notes[0].unix_ms, notes[1].unix_ms);
  EXPECT_GT(notes[0].unix_ms, 1700000000000);         // wall time, not the test's clock
}

TEST_F(SupervisorTest, ProgramThatCannotStartCountsAs127) {
  Supervisor s(
      io_, clock_, 1s, [&](const RankExit& e) { streamed_.push_back(e); },
      [&] { all_exited_ = true; });
  s.Start(Plans(2), {"/nonexistent/trainer"}, dir_);
  ASSERT_TRUE(RunUntil(io_, [&] { return all_exited_; }));
  WorkerOutcome o = DecideOutcome(s.exits(), s.expected(), s.stop_cause());
  EXPECT_EQ(o.exit_code, 127);
  EXPECT_EQ(streamed_.size(), 2u);
}

}  // namespace
}  // namespace trellis::worker
