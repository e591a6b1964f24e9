#pragma once
// NCCL's log on disk: pointing it at a file of the rank's before NCCL starts,
// and reading the communicators' channel counts from that file once they are
// set up. Also PyTorch's blocking wait, turned off in the same environment. The decisions and the parsing are nccl_log.h's; this is the I/O.
// Torch-free.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "trainer_core/parallel/nccl_log.h"

namespace trellis::train {

// For a rank that meets its peers over NCCL, before its first NCCL call
// (before ConnectComm): applies PlanNcclLog to this process's environment
// (setenv). The rank's own file is <dir>/nccl-rank<R>.log when `dir` (the
// checkpoint directory) is given and can be created, else
// $TMPDIR/trellis-nccl-rank<R>-<pid>.log (/tmp without TMPDIR).
NcclLogPlan SetUpNcclLog(int rank, const std::string& dir);

// For the same rank, at the same time: applies PlanNcclBlockingWait to this
// process's environment. Returns its note (empty when nothing changed).
std::string TurnOffNcclBlockingWait();

// Reads the channel counts out of the file NCCL logs to. NCCL sets a
// communicator up at its first collective (PyTorch creates them lazily), so
// the host polls after a step: each poll reads only what was appended since
// the last one (whole lines), and polling stops once a communicator's line has
// been found or after `max_polls` polls that found none (a log without INIT
// lines is not read again and again while it grows).
class NcclLogFollower {
 public:
  static constexpr int kMaxPolls = 20;
  static constexpr size_t kMaxBytesPerPoll = 8 << 20;
  static constexpr size_t kMaxLineBytes = 64 << 10;

  explicit NcclLogFollower(std::string path, int max_polls = kMaxPolls)
      : path_(std::move(path)), max_polls_(max_polls) {}

  // What is known after this poll: the counts once found (without reading
  // again), nullopt before, and for good after `max_polls` empty polls.
  std::optional<NcclChannels> Poll();

  const std::string& path() const { return path_; }
  bool done() const { return found_.has_value() || polls_ >= max_polls_; }

 private:
  std::string path_;
  int max_polls_;
  int polls_ = 0;
  int64_t offset_ = 0;    // bytes read so far
  std::string partial_;   // a last line without its newline yet
  std::optional<NcclChannels> found_;
};

}  // namespace trellis::train
