#include "worker/io/rank_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "common/status.h"

namespace trellis::worker {
namespace {

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

absl::StatusOr<pid_t> SpawnRank(const RankPlan& plan, const std::vector<std::string>& argv,
                                const std::string& working_dir) {
  if (argv.empty()) return absl::InvalidArgumentError("empty rank command");
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(plan.log_path).parent_path(), ec);
  if (ec)
    return absl::InternalError("cannot create the log directory of " + plan.log_path + ": " +
                               ec.message());
  int log_fd = open(plan.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return ErrnoStatus("cannot open " + plan.log_path);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
  posix_spawn_file_actions_addchdir_np(&actions, working_dir.c_str());

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The worker catches or ignores signals (SIGPIPE for sockets, SIGTERM via
  // its event loop); a rank must start with the defaults and nothing blocked.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<std::string> args = plan.argv_prefix;
  args.insert(args.end(), argv.begin(), argv.end());
  std::vector<std::string> env;
  env.reserve(plan.env.size());
  for (const auto& [k, v] : plan.env) env.push_back(k + "=" + v);
  std::vector<char*> c_args = CStrings(args), c_env = CStrings(env);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, c_args[0], &actions, &attr, c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(log_fd);
  if (rc != 0)
    return absl::FailedPreconditionError("cannot start rank " + std::to_string(plan.global_rank) +
                                         " (" + args[0] + "): " + std::strerror(rc));
  return pid;
}

}  // namespace trellis::worker
