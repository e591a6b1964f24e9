#pragma once
// ReadLogs: streams rank output files of a run's attempt (the latest launch),
// optionally following them until the run is terminal. Like WatchReactor, all
// state lives on the controller's loop thread. The follow poll is timed by the
// controller's Clock.

#include <deque>
#include <fstream>
#include <optional>

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
    std::string partial;  // an unfinished last line (prefix mode)
  };
  void Tick();  // loop thread: read what is new, then write or wait
  void OnRun(absl::StatusOr<RunView> view);
  bool ReadNew();  // true when something was queued
  void Pump();
  void FinishOnce(const grpc::Status& status);
  void FindFiles(const RunView& view);

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
};

}  // namespace trellis::controller
