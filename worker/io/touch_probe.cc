#include "worker/io/touch_probe.h"

#include <fcntl.h>
#include <numa.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace trellis::worker {
namespace {

using SteadyClock = std::chrono::steady_clock;

// How long past its budget a child may take (a page fault stuck in reclaim)
// before the parent kills it.
constexpr std::chrono::seconds kKillGrace{5};
// Between time checks inside a chunk, so one slow chunk cannot overrun the budget.
constexpr int64_t kSliceBytes = int64_t{2} << 20;

// Child -> parent, one per chunk (and a last one with the reason); 16 bytes,
// below PIPE_BUF, so each write is atomic.
struct Progress {
  int64_t touched_bytes;
  int32_t stop;  // Stop below; kRunning while it goes on
  int32_t pad;
};
enum Stop : int32_t { kRunning = 0, kBound, kTime, kAllocFailed };

const char* StopName(int32_t stop) {
  switch (stop) {
    case kBound:
      return "bound";
    case kTime:
      return "time budget";
    case kAllocFailed:
      return "allocation failed";
    default:
      return "child ended early";
  }
}

void Send(int fd, int64_t touched, Stop stop) {
  Progress p{touched, stop, 0};
  while (::write(fd, &p, sizeof(p)) < 0 && errno == EINTR) {
  }
}

// Runs in the forked child; never returns. No cleanup: _exit returns every page.
[[noreturn]] void TouchInChild(int fd, int node, const TouchProbeLimits& limits,
                               SteadyClock::time_point deadline) {
  // The OOM killer's first choice on this socket (raising it needs no privilege).
  int adj = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (adj >= 0) {
    [[maybe_unused]] ssize_t n = ::write(adj, "1000", 4);
    ::close(adj);
  }
  numa_set_bind_policy(1);  // strict: reclaim on the socket, never spill to another node
  numa_run_on_node(node);   // zero the pages from the socket's own CPUs; best effort
  const int64_t page = numa_pagesize();
  int64_t touched = 0;
  Stop stop = kBound;
  while (touched < limits.max_bytes && stop == kBound) {
    const int64_t size = std::min(limits.chunk_bytes, limits.max_bytes - touched);
    auto* mem = static_cast<volatile char*>(numa_alloc_onnode(static_cast<size_t>(size), node));
    if (mem == nullptr) {
      stop = kAllocFailed;
      break;
    }
    for (int64_t slice = 0; slice < size; slice += kSliceBytes) {
      if (SteadyClock::now() >= deadline) {
        stop = kTime;
        break;
      }
      const int64_t end = std::min(size, slice + kSliceBytes);
      for (int64_t off = slice; off < end; off += page) mem[off] = 1;
      touched += end - slice;
    }
    if (stop == kBound) Send(fd, touched, kRunning);
  }
  Send(fd, touched, stop);
  ::_exit(0);
}

absl::Status CheckTouchProbeRequest(int numa_node, const TouchProbeLimits& limits) {
  if (numa_available() < 0)
    return absl::FailedPreconditionError(
        "touch probe: libnuma reports that NUMA is not available on this "
        "machine");
  if (numa_node < 0 || numa_node > numa_max_node() || numa_node_size64(numa_node, nullptr) < 0)
    return absl::FailedPreconditionError(absl::StrCat("touch probe: NUMA node ", numa_node,
                                                      " does not exist on this machine (nodes 0..",
                                                      numa_max_node(), ")"));
  if (limits.max_bytes <= 0 || limits.chunk_bytes <= 0 || limits.budget.count() <= 0)
    return absl::InvalidArgumentError("touch probe: bound, chunk and budget must be positive");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TouchProbeResult> TouchProbe(int numa_node, const TouchProbeLimits& limits) {
  if (absl::Status st = CheckTouchProbeRequest(numa_node, limits); !st.ok()) return st;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("touch probe: pipe");
  const auto start = SteadyClock::now();
  const auto deadline = start + std::chrono::duration_cast<SteadyClock::duration>(limits.budget);
  const pid_t pid = ::fork();
  if (pid < 0) {
    absl::Status st = ErrnoStatus("touch probe: fork");
    ::close(fds[0]);
    ::close(fds[1]);
    return st;
  }
  if (pid == 0) {
    ::close(fds[0]);
    TouchInChild(fds[1], numa_node, limits, deadline);
  }
  ::close(fds[1]);

  TouchProbeResult result;
  int32_t stop = kRunning;
  const auto kill_at = deadline + kKillGrace;
  bool killed_late = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - SteadyClock::now());
    pollfd p{fds[0], POLLIN, 0};
    int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count() + 1)) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      ::kill(pid, SIGKILL);
      killed_late = true;
      break;
    }
    Progress msg;
    ssize_t n = ::read(fds[0], &msg, sizeof(msg));
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(msg))) break;  // EOF: the child is gone
    result.obtainable_bytes = msg.touched_bytes;
    stop = msg.stop;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.elapsed = SteadyClock::now() - start;
  if (killed_late)
    result.stopped_by = "time budget (killed while touching)";
  else if (WIFSIGNALED(status))
    result.stopped_by = absl::StrCat("killed by signal ", WTERMSIG(status));
  else
    result.stopped_by = StopName(stop);
  return result;
}

}  // namespace trellis::worker
