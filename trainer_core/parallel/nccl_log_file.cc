#include "trainer_core/parallel/nccl_log_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "trainer_core/error.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

std::optional<std::string> Env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// The rank's own log file: in the checkpoint directory when there is one
// (created if need be), else in TMPDIR with the pid (ranks of other runs on
// the node share it).
std::string OwnFile(int rank, const std::string& dir) {
  if (!dir.empty()) {
    try {
      MakeDirs(dir);
      return JoinPath(dir, "nccl-rank" + std::to_string(rank) + ".log");
    } catch (const TrainError&) {
      // Not writable here: TMPDIR below.
    }
  }
  const char* tmp = std::getenv("TMPDIR");
  return JoinPath(tmp && *tmp ? tmp : "/tmp", "trellis-nccl-rank" + std::to_string(rank) + "-" +
                                                  std::to_string(::getpid()) + ".log");
}

}  // namespace

NcclLogPlan SetUpNcclLog(int rank, const std::string& dir) {
  NcclLogEnv env{Env("NCCL_DEBUG"), Env("NCCL_DEBUG_FILE"), Env("NCCL_DEBUG_SUBSYS")};
  // Our own file only matters (and the directory is only made) when the user
  // has not set NCCL_DEBUG.
  const bool own = !env.debug || env.debug->empty();
  NcclLogPlan plan = PlanNcclLog(env, own ? OwnFile(rank, dir) : "", HostName(), ::getpid());
  for (const auto& [name, value] : plan.set) ::setenv(name.c_str(), value.c_str(), 1);
  return plan;
}

std::string TurnOffNcclBlockingWait() {
  const NcclBlockingWaitPlan plan =
      PlanNcclBlockingWait({Env("TORCH_NCCL_BLOCKING_WAIT"), Env("NCCL_BLOCKING_WAIT")});
  if (plan.turn_off) {
    ::setenv("TORCH_NCCL_BLOCKING_WAIT", "0", 1);
    ::unsetenv("NCCL_BLOCKING_WAIT");  // a value PyTorch refuses would still stop the rank
  }
  return plan.note;
}

std::optional<NcclChannels> NcclLogFollower::Poll() {
  if (done()) return found_;
  ++polls_;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;  // NCCL has not opened it yet
  std::string chunk;
  char buf[64 << 10];
  while (chunk.size() < kMaxBytesPerPoll) {
    const ssize_t n = ::pread(fd, buf, sizeof(buf), offset_);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    chunk.append(buf, static_cast<size_t>(n));
    offset_ += n;
  }
  ::close(fd);
  partial_ += chunk;
  const size_t end = partial_.rfind('\n');
  if (end == std::string::npos) {
    if (partial_.size() > kMaxLineBytes) partial_.clear();  // no log line of NCCL's is this long
    return std::nullopt;
  }
  if (auto c = ParseNcclChannels(std::string_view(partial_).substr(0, end + 1)))
    found_ = found_ ? MergeNcclChannels(*found_, *c) : *c;
  partial_.erase(0, end + 1);
  return found_;
}

}  // namespace trellis::train
