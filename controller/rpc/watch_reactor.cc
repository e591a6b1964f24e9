#include "controller/rpc/watch_reactor.h"
#include "controller/rpc/controller_service.h"

namespace trellis::controller {

namespace asio = boost::asio;

WatchReactor::WatchReactor(Controller* controller, std::string run_id,
                           std::optional<std::string> only_user)
    : controller_(controller), run_id_(std::move(run_id)), only_user_(std::move(only_user)) {
  controller_->Watch(run_id_, this, [this](absl::StatusOr<RunView> view) {
    if (!view.ok()) return FinishOnce(ToGrpc(view.status()));
    if (only_user_ && view->run.user != *only_user_)
      return FinishOnce(NotYours(run_id_, Caller{*only_user_, false}));
    v1::WatchRunEvent e;
    ToProto(*view, e.mutable_snapshot());
    Enqueue(std::move(e));
  });
}

void WatchReactor::OnTransition(const EventRecord& event) {
  v1::WatchRunEvent e;
  ToProto(event, e.mutable_transition());
  Enqueue(std::move(e));
}

void WatchReactor::OnStep(const StepRow& step) {
  // A slow client loses step rows, never transitions.
  if (queue_.size() >= kMaxQueued) return;
  v1::WatchRunEvent e;
  ToProto(step, e.mutable_step());
  Enqueue(std::move(e));
}

void WatchReactor::OnEnd() {
  ended_ = true;
  Pump();
}

void WatchReactor::Enqueue(v1::WatchRunEvent event) {
  queue_.push_back(std::move(event));
  Pump();
}

void WatchReactor::Pump() {
  if (finished_ || in_flight_) return;
  if (!queue_.empty()) {
    writing_ = std::move(queue_.front());
    queue_.pop_front();
    in_flight_ = true;
    StartWrite(&writing_);
    return;
  }
  if (ended_) FinishOnce(grpc::Status::OK);
}

void WatchReactor::FinishOnce(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  Finish(status);
}

void WatchReactor::OnWriteDone(bool ok) {
  asio::post(controller_->io(), [this, ok] {
    in_flight_ = false;
    if (!ok) return FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
    Pump();
  });
}

void WatchReactor::OnCancel() {
  asio::post(controller_->io(), [this] {
    if (!in_flight_) FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  });
}

void WatchReactor::OnDone() {
  controller_->Unwatch(run_id_, this, [this] { delete this; });
}

}  // namespace trellis::controller
