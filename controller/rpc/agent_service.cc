#include "controller/rpc/agent_service.h"

#include <deque>
#include <map>
#include <mutex>
#include <optional>

#include "common/log.h"
#include "controller/app/scrape_targets.h"
#include "controller/rpc/app_proto.h"
#include "controller/rpc/rpc_timer.h"
#include "controller/rpc/validate.h"
#include "proto/step_record_proto.h"

namespace trellis::controller {

namespace {

bool SameIdentity(const v1::WorkerIdentity& a, const v1::WorkerIdentity& b) {
  return a.run_id() == b.run_id() && a.attempt() == b.attempt() && a.launch() == b.launch() &&
         a.node() == b.node() && a.secret() == b.secret();
}

// A worker's report stream for one launch (docs/architecture.md, "The step
// pipeline"): authenticated on its first report, every later report must
// carry the same identity. Batches are checked here and answered either at
// once (refused) or by the step pipeline once stored. Reads go on while
// batches are stored; one ack is written at a time. Finish comes only when
// no batch is in the pipeline, no ack is being written and no report is
// being handled, so the reactor outlives every callback that may touch it
// (a batch whose store failed at once used to finish the stream while its
// read was still being handled, which then read on into a deleted reactor).
class ReportReactor final : public grpc::ServerBidiReactor<v1::AgentReport, v1::ReportAck> {
 public:
  explicit ReportReactor(Controller* controller) : controller_(controller) {
    StartRead(&report_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return Close(grpc::Status::OK);  // the worker closed its side
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closing_) ok = false;  // a batch failed meanwhile: read no more
    }
    if (!ok) return Close(grpc::Status::OK);
    if (grpc::Status st = Check(report_); !st.ok()) return Close(st);
    {
      std::lock_guard<std::mutex> lock(mu_);
      handling_ = true;  // until Handle reads on or finishes (or Close)
    }
    if (!authenticated_) {
      identity_ = report_.id();
      controller_->AuthenticateWorker(FromProto(identity_), [this](absl::StatusOr<bool> r) {
        if (!r.ok()) return Close(ToGrpc(r.status()));
        authenticated_ = true;
        Handle();
      });
      return;
    }
    if (!SameIdentity(identity_, report_.id()))
      return Close(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                "id: differs from the stream's first report"));
    Handle();
  }

  void OnWriteDone(bool ok) override {
    std::optional<grpc::Status> finish;
    const v1::ReportAck* next = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      acks_.pop_front();
      if (!ok) {  // the worker is gone: its acks go nowhere
        closing_ = true;
        acks_.clear();
      }
      if (!acks_.empty()) {
        next = &acks_.front();
      } else {
        writing_ = false;
        finish = FinishIfIdle();
      }
    }
    if (next) StartWrite(next);
    if (finish) Finish(*finish);
  }

  void OnDone() override { delete this; }

 private:
  void Handle() {
    WorkerId id = FromProto(identity_);
    switch (report_.body_case()) {
      case v1::AgentReport::kBatch:
        Submit(id);  // false: closing, which the end below sees
        break;
      case v1::AgentReport::kRankExit:
        controller_->RecordRankExit(id, FromProto(report_.rank_exit(), id.node));
        break;
      case v1::AgentReport::kHeartbeat:
      {
        std::map<int, char> states;
        for (const auto& s : report_.heartbeat().rank_states())
          if (s.state().size() == 1) states[s.rank()] = s.state()[0];
        controller_->Heartbeat(id, report_.heartbeat().stopping(), std::move(states));
      }
        break;
      default:  // a report of a newer worker: ignored
        break;
    }
    // Read on, unless a batch failed meanwhile: then finish once idle.
    std::optional<grpc::Status> finish;
    bool read_on = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      handling_ = false;
      if (closing_) {
        reads_done_ = true;
        finish = FinishIfIdle();
      } else {
        read_on = true;
      }
    }
    if (read_on) StartRead(&report_);
    if (finish) Finish(*finish);
  }

  // False when the stream is being closed (the pipeline is full).
  bool Submit(const WorkerId& id) {
    const v1::StepBatch& in = report_.batch();
    StepBatch batch;
    batch.source = {id.run_id, id.attempt, id.launch, id.node};
    batch.seq = in.seq();
    // Counted before converting: a huge batch is not copied.
    if (in.steps_size() <= static_cast<int>(kMaxBatchRecords)) {
      batch.records.reserve(in.steps_size());
      for (const v1::RankStep& r : in.steps())
        batch.records.push_back({r.rank(), trellis::FromProto(r.record())});
    } else {
      batch.records.resize(in.steps_size());  // for CheckBatch's message only
    }
    // Taken only while the stream is open; Finish waits for every batch taken.
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closing_) return false;
      ++in_flight_;
    }
    if (auto refusal = CheckBatch(batch)) {
      controller_->ingest_metrics().Refused(refusal->fault);
      controller_->ingest_metrics().Batch(IngestResult::kRefused, batch.records.size());
      v1::ReportAck ack;
      ack.set_seq(in.seq());
      ack.set_result(v1::ReportAck::RESULT_REFUSED);
      ack.set_error(refusal->error);
      Answer(std::move(ack));
      return true;
    }
    uint64_t seq = in.seq();
    bool taken = controller_->SubmitSteps(
        std::move(batch), [this, seq](absl::StatusOr<BatchResult> r) {
          if (!r.ok()) return Fail(ToGrpc(r.status()));
          v1::ReportAck ack;
          ack.set_seq(seq);
          ack.set_result(*r == BatchResult::kStored ? v1::ReportAck::RESULT_STORED
                                                    : v1::ReportAck::RESULT_DUPLICATE);
          Answer(std::move(ack));
        });
    if (taken) return true;
    Fail(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "the controller's step pipeline is full; send again later"));
    return false;
  }

  // One batch answered: queue its ack (unless closing).
  void Answer(v1::ReportAck ack) {
    std::optional<grpc::Status> finish;
    const v1::ReportAck* write = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
      if (!closing_) {
        acks_.push_back(std::move(ack));
        if (!writing_) {
          writing_ = true;
          write = &acks_.front();  // stays until OnWriteDone pops it
        }
      }
      if (!write) finish = FinishIfIdle();
    }
    if (write) StartWrite(write);
    if (finish) Finish(*finish);
  }

  // One batch not stored: the stream ends with `status` once idle; the
  // worker sends its unanswered batches again on a new one.
  void Fail(grpc::Status status) {
    std::optional<grpc::Status> finish;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
      if (!closing_) status_ = status;
      closing_ = true;
      finish = FinishIfIdle();
    }
    if (finish) Finish(*finish);
  }

  // No more reads (the worker closed its side, or the stream is refused):
  // called where a report was read, so no report is being handled after it.
  void Close(grpc::Status status) {
    std::optional<grpc::Status> finish;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reads_done_ = true;
      handling_ = false;
      if (!status.ok()) {
        if (!closing_) status_ = status;
        closing_ = true;
      }
      finish = FinishIfIdle();
    }
    if (finish) Finish(*finish);
  }

  // Under mu_: the status to finish with, once, when no batch is taken and
  // no ack is being written, and either no read is pending or the stream is
  // closing (Finish then cancels the pending read).
  std::optional<grpc::Status> FinishIfIdle() {
    if (finished_ || in_flight_ > 0 || writing_ || handling_ || !(reads_done_ || closing_))
      return std::nullopt;
    finished_ = true;
    return status_;
  }

  Controller* controller_;
  v1::AgentReport report_;
  v1::WorkerIdentity identity_;
  bool authenticated_ = false;

  std::mutex mu_;
  std::deque<v1::ReportAck> acks_;  // the front is being written
  int in_flight_ = 0;               // batches taken and not yet answered
  bool writing_ = false;
  bool handling_ = false;  // a report read is being handled (OnReadDone to Handle's end)
  bool reads_done_ = false;
  bool closing_ = false;  // no more batches or acks: finish once idle
  bool finished_ = false;
  grpc::Status status_;
};

}  // namespace

grpc::ServerUnaryReactor* AgentServiceImpl::Register(grpc::CallbackServerContext* ctx,
                                                     const v1::RegisterRequest* req,
                                                     v1::GateDecision* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (grpc::Status st = Check(*req); !st.ok()) {
    reactor->Finish(st);
    return reactor;
  }
  // Only a scrape target's address: anything else is dropped, not refused
  // (metrics are not worth failing a launch for).
  std::string metrics_addr = req->metrics_addr();
  if (!metrics_addr.empty() && !IsHostPort(metrics_addr)) {
    spdlog::debug(
        "run {}: node {}: metrics_addr is not HOST:PORT (at most 255 characters); "
        "ignored",
        req->id().run_id(), req->id().node());
    metrics_addr.clear();
  }
  controller_->Register(
      FromProto(req->id()), req->version(), req->hostname(), ProbeFromWorker(req->probe()),
      SlurmStep{req->slurm_job_id(), req->slurm_step_id()}, std::move(metrics_addr),
      Timed(controller_->metrics(), RpcMethod::kRegister,
            [reactor, resp](absl::StatusOr<GateAnswer> a) {
              if (!a.ok()) return reactor->Finish(ToGrpc(a.status()));
              ToProto(*a, resp);
              reactor->Finish(grpc::Status::OK);
            }));
  return reactor;
}

grpc::ServerBidiReactor<v1::AgentReport, v1::ReportAck>* AgentServiceImpl::Report(
    grpc::CallbackServerContext* ctx) {
  return new ReportReactor(controller_);
}

grpc::ServerUnaryReactor* AgentServiceImpl::ReportExit(grpc::CallbackServerContext* ctx,
                                                       const v1::ReportExitRequest* req,
                                                       v1::ReportExitResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (grpc::Status st = Check(*req); !st.ok()) {
    reactor->Finish(st);
    return reactor;
  }
  controller_->ReportExit(
      FromProto(req->id()), FromProto(*req),
      Timed(controller_->metrics(), RpcMethod::kReportExit,
            [reactor](absl::StatusOr<bool> r) { reactor->Finish(ToGrpc(r.status())); }));
  return reactor;
}

grpc::ServerUnaryReactor* AgentServiceImpl::NextLaunch(grpc::CallbackServerContext* ctx,
                                                       const v1::NextLaunchRequest* req,
                                                       v1::NextLaunchResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (grpc::Status st = Check(*req); !st.ok()) {
    reactor->Finish(st);
    return reactor;
  }
  NextLaunchQuestion q{req->step_exit_code(), req->requeue_count(), req->allocation_nodelist(),
                       req->terminated_by_slurm(), req->time_limit_warned()};
  controller_->NextLaunch(FromProto(req->id()), std::move(q),
                          Timed(controller_->metrics(), RpcMethod::kNextLaunch,
                                [reactor, resp](absl::StatusOr<NextLaunchAnswer> a) {
                                  if (!a.ok()) return reactor->Finish(ToGrpc(a.status()));
                                  ToProto(*a, resp);
                                  reactor->Finish(grpc::Status::OK);
                                }));
  return reactor;
}

grpc::ServerUnaryReactor* AgentServiceImpl::StandBy(grpc::CallbackServerContext* ctx,
                                                    const v1::StandByRequest* req,
                                                    v1::StandByAnswer* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (grpc::Status st = Check(*req); !st.ok()) {
    reactor->Finish(st);
    return reactor;
  }
  StandbyCall call{req->run_id(),  req->pool(),         req->node(),
                   req->secret(),  req->version(),      req->hostname(),
                   req->slurm_job_id(), ProbeFromWorker(req->probe())};
  controller_->StandBy(std::move(call),
                       Timed(controller_->metrics(), RpcMethod::kStandBy,
                             [reactor, resp](absl::StatusOr<StandbyAnswer> a) {
                               if (!a.ok()) return reactor->Finish(ToGrpc(a.status()));
                               resp->set_leave(a->leave);
                               resp->set_reason(a->reason);
                               reactor->Finish(grpc::Status::OK);
                             }));
  return reactor;
}

}  // namespace trellis::controller
