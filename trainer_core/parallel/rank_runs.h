#pragma once
// Test helper: starts `world` trellis-train processes as the ranks of one run
// (RANK, WORLD_SIZE, MASTER_ADDR/PORT on 127.0.0.1, a fresh port), reads
// their JSON step records as they come, and kills them all if any is still
// running at the deadline. Torch-free: the tests that use it only spawn the
// binary and read what it prints.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/step_record.h"
#include "trainer_core/files.h"
#include "trainer_core/parallel/multiprocess.h"

extern char** environ;

namespace trellis::train::testing {

struct RankRun {
  std::vector<StepRecord> records;
  int status = -1;
  std::string err;  // everything the rank wrote to stderr
};

struct WorldOptions {
  std::chrono::seconds timeout{180};
  int local_world_size = 2;  // ranks per emulated node (at most the world)
  std::vector<std::string> env;                       // for every rank, before the launcher's
  std::vector<std::string> unset;  // names left out of the environment the ranks inherit
  std::function<std::vector<std::string>(int)> rank_env;  // per rank (e.g. its GPU)
  // Called with each step record as it arrives, and the ranks' pids.
  std::function<void(int rank, const StepRecord&, const std::vector<pid_t>&)> on_record;
  // When rank 0 ends, kill the ranks still running (a test that stopped one).
  bool rank0_ends_world = false;
};

inline std::vector<RankRun> RunWorld(const std::string& binary, int world,
                                     const std::vector<std::string>& args, const std::string& dir,
                                     const WorldOptions& options = {}) {
  const int port = FreePort();
  std::vector<pid_t> pids(world);
  std::vector<int> fds(world);
  std::vector<RankRun> runs(world);
  for (int r = 0; r < world; ++r) {
    // getenv takes the first match: the test's overrides, then the launcher
    // variables, then this process's environment.
    std::vector<std::string> env_s = options.env;
    if (options.rank_env)
      for (auto& kv : options.rank_env(r)) env_s.push_back(kv);
    for (const std::string& kv : std::vector<std::string>{
             "RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world),
             "LOCAL_WORLD_SIZE=" + std::to_string(std::min(world, options.local_world_size)),
             "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port),
             "OMP_NUM_THREADS=1", "TRELLIS_COMM_TIMEOUT_S=60"})
      env_s.push_back(kv);
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      const std::string name = kv.substr(0, kv.find('='));
      if (std::find(options.unset.begin(), options.unset.end(), name) == options.unset.end())
        env_s.push_back(kv);
    }
    std::vector<char*> envp;
    for (auto& kv : env_s) envp.push_back(kv.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_s{binary};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    const std::string err_path = JoinPath(dir, "rank" + std::to_string(r) + ".err");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    EXPECT_EQ(posix_spawn(&pids[r], argv[0], &actions, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    fds[r] = out[0];
  }
  // Decode records line by line as they come.
  std::vector<std::string> pending(world);
  std::vector<bool> closed;
  auto on_data = [&](size_t r, std::string_view bytes) {
    pending[r].append(bytes);
    for (size_t nl; (nl = pending[r].find('\n')) != std::string::npos;) {
      std::string error;
      auto rec = DecodeStepRecord(std::string_view(pending[r]).substr(0, nl), &error);
      EXPECT_TRUE(rec) << "rank " << r << ": " << error;
      pending[r].erase(0, nl + 1);
      if (!rec) continue;
      runs[r].records.push_back(*rec);
      if (options.on_record) options.on_record(static_cast<int>(r), *rec, pids);
    }
  };
  auto on_closed = [&](size_t r) {
    if (r != 0 || !options.rank0_ends_world) return;
    for (int k = 1; k < world; ++k) {
      ::kill(pids[k], SIGKILL);  // harmless for a rank that already ended
      ::kill(pids[k], SIGCONT);
    }
  };
  ReadUntilClosed(fds, options.timeout, &closed, on_data, on_closed);
  for (int r = 0; r < world; ++r) {
    if (!closed[r]) {
      ::kill(pids[r], SIGKILL);
      ADD_FAILURE() << "rank " << r << " still running after " << options.timeout.count()
                    << "s; killed";
    }
    ::kill(pids[r], SIGCONT);  // a rank a test stopped must be able to die
    ::waitpid(pids[r], &runs[r].status, 0);
    ::close(fds[r]);
    std::ifstream e(JoinPath(dir, "rank" + std::to_string(r) + ".err"));
    runs[r].err.assign(std::istreambuf_iterator<char>(e), {});
  }
  return runs;
}

inline bool AllExitedZero(const std::vector<RankRun>& runs, std::string* why) {
  for (size_t r = 0; r < runs.size(); ++r)
    if (!WIFEXITED(runs[r].status) || WEXITSTATUS(runs[r].status) != 0) {
      *why = "rank " + std::to_string(r) + " status " + std::to_string(runs[r].status) + ": " +
             runs[r].err;
      return false;
    }
  return true;
}

}  // namespace trellis::train::testing
