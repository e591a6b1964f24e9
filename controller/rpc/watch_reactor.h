#pragma once
// WatchRun: the run's snapshot, then its transitions and step summaries until
// it is terminal. All state lives on the controller's loop thread; gRPC's
// callbacks only post there. One write in flight; a bounded queue.

#include <deque>
#include <optional>

#include "controller/app/controller.h"
#include "controller/rpc/app_proto.h"
#include "trellis/v1/controller.grpc.pb.h"

namespace trellis::controller {

class WatchReactor final : public grpc::ServerWriteReactor<v1::WatchRunEvent>, public WatchSink {
 public:
  // `only_user`: the run must be this user's (a user's call); none: any run.
  WatchReactor(Controller* controller, std::string run_id,
               std::optional<std::string> only_user = std::nullopt);

  void OnTransition(const EventRecord& event) override;
  void OnStep(const StepRow& step) override;
  void OnEnd() override;

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  static constexpr size_t kMaxQueued = 1000;
  void Enqueue(v1::WatchRunEvent event);
  void Pump();  // loop thread
  void FinishOnce(const grpc::Status& status);

  Controller* controller_;
  std::string run_id_;
  std::optional<std::string> only_user_;
  std::deque<v1::WatchRunEvent> queue_;
  v1::WatchRunEvent writing_;
  bool in_flight_ = false;
  bool ended_ = false;
  bool finished_ = false;
};

}  // namespace trellis::controller
