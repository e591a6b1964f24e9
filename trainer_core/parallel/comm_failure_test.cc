// A rank that fails while a collective is in flight, its peer gone silent:
// the peer watch, not the group's destruction, ends it, naming the peer.
// This is the path of gpu_multirank_ops_test's killed peer on NCCL, where the
// next collective fails as it is issued and unwinding joins PyTorch's
// watchdog (a minute, then SIGABRT); here gloo's destructor waits for the
// collective up to the timeout instead.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>

#include "trainer_core/files.h"
#include "trainer_core/parallel/comm.h"
#include "trainer_core/parallel/local_ranks_test_util.h"
#include "trainer_core/parallel/multiprocess.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {
namespace {

using namespace std::chrono_literals;

// The peer watch speaks after half of it (peer_watch.h), gloo's collective
// gives up after all of it.
constexpr std::chrono::seconds kTimeout = 8s;

// Forks rank `rank` of 2 (stderr to `err`, when given): it meets the other,
// then rank 1 stops itself (silent, its sockets open) and rank 0 throws with
// an all-reduce in flight that rank 1 will never join. Exit 3: the exception
// came through; 1: the peer watch ended it.
pid_t ForkRank(int rank, int port, const std::string& err) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (!err.empty()) {
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
  }
  try {
    auto comm = testing::ConnectLocalRank(rank, 2, port, kTimeout);
    if (rank == 1) {
      ::raise(SIGSTOP);
      ::_exit(0);
    }
    auto sum = torch::ones({4});
    auto work = comm->StartAllReduceSum(sum);
    throw std::runtime_error("rank 0 fails with an all-reduce in flight");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "came through: %s\n", e.what());
    std::fflush(stderr);
    ::_exit(3);
  }
}

TEST(CommFailureTest, ARankFailingWithACollectiveInFlightIsEndedByThePeerWatch) {
  const std::string dir = MakeTempDir("trellis-comm-failure-test");
  const std::string err = JoinPath(dir, "rank0.err");
  const int port = testing::FreePort();
  const auto start = std::chrono::steady_clock::now();
  const pid_t rank0 = ForkRank(0, port, err);
  const pid_t rank1 = ForkRank(1, port, "");
  int status = -1;
  while (::waitpid(rank0, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - start > 4 * kTimeout) {
      ::kill(rank0, SIGKILL);
      ::waitpid(rank0, &status, 0);
      ADD_FAILURE() << "rank 0 still running after " << (4 * kTimeout).count() << "s; killed";
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  const auto took = std::chrono::steady_clock::now() - start;
  ::kill(rank1, SIGKILL);
  ::kill(rank1, SIGCONT);
  ::waitpid(rank1, nullptr, 0);
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  RemoveTree(dir);
  std::printf("rank 0 ended %.1fs after the ranks started (timeout %llds)\n",
              std::chrono::duration<double>(took).count(),
              static_cast<long long>(kTimeout.count()));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << "\n" << text;
  EXPECT_NE(text.find("comm: rank 0 of 2: rank 1 has not been heard from for"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("came through"), std::string::npos) << text;
}

}  // namespace
}  // namespace trellis::train
