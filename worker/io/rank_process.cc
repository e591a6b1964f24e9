#include "worker/io/rank_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/exit_codes.h"
#include "common/status.h"
#include "worker/io/node_info.h"

namespace trellis::worker {
namespace {

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Opens `path` on a descriptor above 2, so that the child's dup2 onto 0, 1
// and 2 never overwrites one of its sources (the worker's stdin may be closed).
int OpenAbove2(const char* path, int flags, mode_t mode) {
  int fd = ::open(path, flags | O_CLOEXEC, mode);
  if (fd < 0 || fd > 2) return fd;
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int err = errno;
  ::close(fd);
  errno = err;
  return moved;
}

// Everything the child needs, prepared before fork: after it, the child of a
// multi-threaded process may only make async-signal-safe calls.
struct ChildSetup {
  pid_t parent = 0;
  int null_fd = -1;
  int log_fd = -1;
  int error_fd = -1;  // close-on-exec: EOF tells the parent that exec succeeded
  const char* working_dir = nullptr;
  const char* program = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
};

[[noreturn]] void Fail(const ChildSetup& s, int err) {
  if (::write(s.error_fd, &err, sizeof err) != static_cast<ssize_t>(sizeof err)) {
    // Nothing left to tell the parent with; it sees the exit status.
  }
  ::_exit(kExitCannotStart);
}

[[noreturn]] void ExecChild(const ChildSetup& s) {
  // A worker killed with SIGKILL (by Slurm, the OOM killer, a node agent)
  // cleans nothing up: without this its ranks would keep running, holding the
  // GPU and the rendezvous port, and the next launch on this node would fail.
  // The signal fires when the thread that forked exits, not the process:
  // SpawnRank runs on the agent's main thread (Supervisor::Start from
  // Supervise in worker/app/agent.cc, the thread that then runs the event
  // loop), which lives as long as the launch. It reaches the rank's process,
  // not what the rank started: those belong to the rank (a rank that is a
  // launcher should set the same for its children).
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) Fail(s, errno);
  // The worker may have died between fork and prctl: then no signal comes.
  if (::getppid() != s.parent) ::_exit(kExitCannotStart);
  // Its own process group, so that a signal to it reaches everything it started.
  if (::setpgid(0, 0) != 0) Fail(s, errno);
  if (::dup2(s.null_fd, 0) < 0 || ::dup2(s.log_fd, 1) < 0 || ::dup2(s.log_fd, 2) < 0)
    Fail(s, errno);
  if (::chdir(s.working_dir) != 0) Fail(s, errno);
  // The worker catches or ignores signals (SIGPIPE for sockets, SIGTERM via
  // its event loop); a rank starts with the defaults and nothing blocked.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);  // EINVAL for some: fine
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(s.program, s.argv, s.envp);
  Fail(s, errno);
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

  std::vector<std::string> args = plan.argv_prefix;
  args.insert(args.end(), argv.begin(), argv.end());
  auto cannot_start = [&](int err) {
    return absl::FailedPreconditionError("cannot start rank " + std::to_string(plan.global_rank) +
                                         " (" + args[0] + "): " + std::strerror(err));
  };
  // Searched like execvp: in the worker's PATH, not the rank's.
  std::string program = args[0];
  if (program.find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    program = FindExecutable(program, path != nullptr ? path : "/bin:/usr/bin");
    if (program.empty()) return cannot_start(ENOENT);
  }
  std::vector<std::string> env;
  env.reserve(plan.env.size());
  for (const auto& [k, v] : plan.env) env.push_back(k + "=" + v);
  std::vector<char*> c_args = CStrings(args), c_env = CStrings(env);

  int log_fd = OpenAbove2(plan.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (log_fd < 0) return ErrnoStatus("cannot open " + plan.log_path);
  int null_fd = OpenAbove2("/dev/null", O_RDONLY, 0);
  int error_pipe[2] = {-1, -1};
  if (null_fd < 0 || ::pipe2(error_pipe, O_CLOEXEC) != 0) {
    absl::Status st = ErrnoStatus("cannot start rank " + std::to_string(plan.global_rank));
    for (int fd : {log_fd, null_fd})
      if (fd >= 0) ::close(fd);
    return st;
  }
  ChildSetup setup;
  setup.parent = ::getpid();
  setup.null_fd = null_fd;
  setup.log_fd = log_fd;
  setup.error_fd = error_pipe[1];
  setup.working_dir = working_dir.c_str();
  setup.program = program.c_str();
  setup.argv = c_args.data();
  setup.envp = c_env.data();

  // No signal handler of the worker may run in the child before it resets them.
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = ::fork();
  if (pid == 0) ExecChild(setup);
  int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  for (int fd : {log_fd, null_fd, error_pipe[1]}) ::close(fd);
  if (pid < 0) {
    ::close(error_pipe[0]);
    return ErrnoStatus("cannot fork rank " + std::to_string(plan.global_rank), fork_errno);
  }
  // Returns at exec (EOF) or with the child's errno, so that a program that
  // cannot start is an error here, as with posix_spawn.
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(error_pipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(error_pipe[0]);
  if (n > 0) {
    int status;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return cannot_start(child_errno);
  }
  return pid;
}

char ProcessStateIn(const std::string& stat_line) {
  const size_t close = stat_line.rfind(')');
  if (close == std::string::npos || close + 2 >= stat_line.size()) return 0;
  return stat_line[close + 2];
}

char ProcessState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  return ProcessStateIn(line);
}

}  // namespace trellis::worker
