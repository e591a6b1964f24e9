#pragma once
// ReadLogs: streams rank output files of a run's attempt (the latest launch),
// optionally following them until the run is terminal. Like WatchReactor, all
// state lives on the controller's loop thread. The follow poll is timed by the
// controller's Clock.

#include <deque>
#include <fstream>
#include <optional>

#include "common/log_times.h"
#include "common/loop_timer.h"
#include "controller/app/controller.h"
#include "trellis/v1/controller.grpc.pb.h"

namespace trellis::controller {

class LogReactor final : public grpc::ServerWriteReactor<v1::LogChunk> {
 public:
  // `only_user`: the run must be this user's (a user's call); none: any run.
  LogReactor(Controller* controller, v1::ReadLogsRequest request,
             std::optional<std::string> only_user = std::nullopt);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct RankFile {
    int rank;
    std::string path;
    uint64_t offset = 0;
    std::string partial;  // an unfinished last line (line mode)
    // When its bytes were written (common/log_times.h), read on as the
    // .times file grows; the bytes of it read so far.
    std::vector<LogTimeNote> notes;
    size_t times_read = 0;
  };
  void Tick();  // loop thread: read what is new, then write or wait
  void OnRun(absl::StatusOr<RunView> view);
  bool ReadNew();  // true when something was queued
  void Pump();
  void FinishOnce(const grpc::Status& status);
  // The files to read now (FindLogFiles), those known keeping their offsets;
  // NOT_FOUND naming what there is for an attempt, launch, rank or node that
  // does not exist.
  absl::Status FindFiles(const RunView& view);
  // What opens each line of `f` that ends at byte `end`: its time (with
  // --timestamps), then where it comes from (several ranks, the batch script).
  std::string LinePrefix(const RankFile& f, uint64_t end) const;
  // The first byte of a file just found that --tail and --since let through.
  uint64_t StartOffset(RankFile& f) const;

  Controller* controller_;
  v1::ReadLogsRequest request_;
  std::optional<std::string> only_user_;
  LoopTimer timer_;
  std::vector<RankFile> files_;
  std::string launch_dir_;
  std::deque<v1::LogChunk> queue_;
  v1::LogChunk writing_;
  bool in_flight_ = false;
  bool run_terminal_ = false;
  bool finished_ = false;
  bool read_once_ = false;  // --tail applies to the files found at the start
};

}  // namespace trellis::controller
