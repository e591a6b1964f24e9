#include "worker/io/rank_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

namespace trellis::worker {
namespace {

using namespace std::chrono_literals;

// A worker killed with SIGKILL takes its ranks with it.
// The state letter follows the command's last ')': a command may hold both.
TEST(RankProcessTest, TheStateIsReadAfterTheCommandsLastParenthesis) {
  EXPECT_EQ(ProcessStateIn("4242 (trellis-rank) T 1 4242 4242 0 -1"), 'T');
  EXPECT_EQ(ProcessStateIn("7 (a (b) c) D 1 7"), 'D');
  EXPECT_EQ(ProcessStateIn("7 (cut"), 0);
  EXPECT_EQ(ProcessStateIn(""), 0);
  EXPECT_EQ(ProcessState(::getpid()), 'R');  // reading its own stat, it runs
  pid_t child = ::fork();
  if (child == 0) {
    ::raise(SIGSTOP);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, WUNTRACED), child);
  EXPECT_EQ(ProcessState(child), 'T');
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  EXPECT_EQ(ProcessState(child), 0) << "gone";
}

TEST(RankProcessTest, RankDiesWithItsWorker) {
  char tmpl[] = "/tmp/trellis-rank-process-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  // The orphaned rank is reparented to this process, which can then reap it
  // and see how it ended.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t worker = fork();
  ASSERT_GE(worker, 0);
  if (worker == 0) {  // the "worker": spawns a rank, tells its pid, waits to be killed
    close(fds[0]);
    RankPlan plan;
    plan.global_rank = 0;
    plan.log_path = dir + "/rank-0.log";
    plan.env = {{"PATH", "/usr/bin:/bin"}};
    auto rank = SpawnRank(plan, {"sleep", "60"}, dir);
    pid_t pid = rank.ok() ? *rank : -1;
    if (write(fds[1], &pid, sizeof pid) != static_cast<ssize_t>(sizeof pid)) _exit(1);
    for (;;) pause();
  }
  close(fds[1]);
  pid_t rank = -1;
  ASSERT_EQ(read(fds[0], &rank, sizeof rank), static_cast<ssize_t>(sizeof rank));
  close(fds[0]);
  ASSERT_GT(rank, 0);

  ASSERT_EQ(kill(worker, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(worker, &status, 0), worker);

  const auto deadline = std::chrono::steady_clock::now() + 1s;
  pid_t reaped = 0;
  while ((reaped = waitpid(rank, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  if (reaped != rank) {  // leave nothing behind, then fail
    kill(rank, SIGKILL);
    waitpid(rank, &status, 0);
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(reaped, rank) << "the rank outlived its worker by more than a second";
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

}  // namespace
}  // namespace trellis::worker
