#include "trainer_core/host/rank_host.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/exit_codes.h"
#include "common/step_record.h"
#include "trainer_core/error.h"
#include "trainer_core/parallel/comm.h"
#include "trainer_core/parallel/nccl_log_file.h"
#include "trainer_core/stop_signal.h"
#include "trainer_core/trainer.h"

namespace trellis::train {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Newline-delimited step records to the worker. Connects once; a failed
// write closes it (reported once on stderr).
class StepSocket {
 public:
  explicit StepSocket(const std::string& path) : path_(path) {
    if (path.empty()) return;
    sockaddr_un addr{};
    if (path.size() >= sizeof(addr.sun_path))
      throw TrainError("TRELLIS_STEP_SOCKET: path too long: " + path);
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      throw TrainError("TRELLIS_STEP_SOCKET: cannot connect to " + path + ": " +
                       std::strerror(errno));
  }
  ~StepSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  void Write(const std::string& line) {
    for (size_t at = 0; fd_ >= 0 && at < line.size();) {
      ssize_t n = ::send(fd_, line.data() + at, line.size() - at, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        std::fprintf(stderr, "trellis rank: step socket %s: %s; records stop\n", path_.c_str(),
                     std::strerror(errno));
        ::close(fd_);
        fd_ = -1;
        return;
      }
      at += n;
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

int64_t ResumeStep(const std::string& text) {
  if (text.empty() || text == "-1") return kStartFresh;  // -1: the controller found no checkpoint
  if (text == "latest") return kResumeLatest;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || v < 0)
    throw TrainError("TRELLIS_RESUME_STEP=\"" + text + "\": must be latest or a step number");
  return v;
}

// Seconds between failures of the run's nodes (the controller's figure at
// GO); absent: 0, the trainer's default.
double MtbfSeconds(const std::string& text) {
  if (text.empty()) return 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !(v > 0) || !std::isfinite(v))
    throw TrainError("TRELLIS_MTBF_S=\"" + text + "\": must be seconds, a number above 0");
  return v;
}

// One root per line (the worker's encoding of the gate's data roots).
std::vector<std::string> DataRoots(const std::string& text) {
  std::vector<std::string> roots;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    if (end > start) roots.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return roots;
}

}  // namespace

int RunHostedRank(const spec::TrainerSpec& spec) {
  InstallStopSignal();  // first: a warning during start-up must not kill the rank
  const auto started = std::chrono::steady_clock::now();
  try {
    CommOptions comm_options = CommOptionsFromEnv();
    ChooseRankDevice(spec.training, &comm_options);
    // NCCL's log to a file (in the checkpoint directory), before NCCL starts;
    // its channel count goes in the step records.
    const std::string checkpoint_dir = Env("TRELLIS_CHECKPOINT_DIR");
    NcclLogPlan nccl_log;
    std::string blocking_wait_note;
    if (MeetsOverNccl(comm_options)) {
      nccl_log = SetUpNcclLog(comm_options.rank, checkpoint_dir);
      blocking_wait_note = TurnOffNcclBlockingWait();  // nccl_log.h says why
    }
    StepSocket socket(Env("TRELLIS_STEP_SOCKET"));
    TrainerOptions options;
    options.connect = comm_options;  // met once the spec and any resume are checked
    options.local_world_size = std::atoi(Env("LOCAL_WORLD_SIZE").c_str());
    options.checkpoint_dir = checkpoint_dir;
    options.nccl_log = nccl_log.follow;
    options.on_note = [](const std::string& line) {
      std::fprintf(stderr, "trellis rank: %s\n", line.c_str());
    };
    options.resume_step = ResumeStep(Env("TRELLIS_RESUME_STEP"));
    options.on_step = [&socket](const StepRecord& r) { socket.Write(EncodeStepRecord(r) + "\n"); };
    options.stop_requested = StopSignalled;
    options.data_roots = DataRoots(Env("TRELLIS_DATA_ROOTS"));
    options.mtbf_s = MtbfSeconds(Env("TRELLIS_MTBF_S"));
    Trainer trainer(spec, std::move(options));
    // The start-up time (rendezvous, model, checkpoint) is what a relaunch
    // costs before its first step.
    std::fprintf(stderr, "trellis rank: %s; starting at step %ld, %.1f s after the rank started\n",
                 trainer.Describe().c_str(), static_cast<long>(trainer.step()),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    std::fprintf(stderr, "trellis rank: %s\n", trainer.DescribeDevice().c_str());
    if (!nccl_log.note.empty()) std::fprintf(stderr, "trellis rank: %s\n", nccl_log.note.c_str());
    if (!blocking_wait_note.empty())
      std::fprintf(stderr, "trellis rank: %s\n", blocking_wait_note.c_str());
    if (trainer.Run(spec.training.steps))
      std::fprintf(stderr,
                   "trellis rank: stopped at step %ld for Slurm's wall-time warning, with a "
                   "checkpoint; the run continues in a new attempt\n",
                   static_cast<long>(trainer.step()));
    return 0;
  } catch (const RefusedInput& e) {
    std::fprintf(stderr, "trellis rank: %s\n", e.what());
    return kExitDoNotRetry;
  } catch (const DamagedCheckpoint& e) {
    std::fprintf(stderr, "trellis rank: damaged checkpoint step %ld: %s\n",
                 static_cast<long>(e.step()), e.what());
    std::fflush(stderr);
    // At once: the peers fail as soon as this rank's connections close, and
    // their worker's stop would otherwise end this rank by a signal during its
    // teardown, losing the exit code the controller reads (failure_class.h).
    std::_Exit(kExitDamagedCheckpoint);
  } catch (const TrainError& e) {
    std::fprintf(stderr, "trellis rank: %s\n", e.what());
    return 1;
  }
}

}  // namespace trellis::train
