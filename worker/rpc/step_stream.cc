#include "worker/rpc/step_stream.h"

#include <random>

#include "common/log.h"
#include "proto/step_record_proto.h"
#include "worker/rpc/agent_proto.h"

namespace trellis::worker {

namespace {
// Rank exits are few and always kept; heartbeats beyond this are dropped.
constexpr size_t kMaxQueuedHeartbeats = 4;
// The link's waits cannot be interrupted: Close, once its flush is over,
// waits at most this long for the stream's thread.
constexpr Seconds kStreamConnectSlice{0.2};
}  // namespace

StepStream::StepStream(std::shared_ptr<ControllerLink> link, v1::WorkerIdentity id,
                       Options options, Clock& clock)
    : link_(std::move(link)), id_(std::move(id)), options_(options), clock_(clock) {}

StepStream::~StepStream() { Close(std::chrono::steady_clock::duration::zero()); }

void StepStream::Start() {
  thread_ = std::thread([this] { Run(); });
}

void StepStream::SendStep(int rank, const StepRecord& record) {
  v1::RankStep step;
  step.set_rank(rank);
  ToProto(record, step.mutable_record());
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) return;
  if (open_.empty()) open_since_ = clock_.SteadyNow();
  open_.push_back(std::move(step));
  ++held_;
  if (open_.size() >= options_.max_batch_records) SealLocked();
  while (held_ > options_.max_held && !batches_.empty()) DropOldestLocked();
  cv_.notify_all();
}

void StepStream::SendRankExit(const RankExit& exit) {
  v1::AgentReport r;
  *r.mutable_id() = id_;
  ToProto(exit, r.mutable_rank_exit());
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) return;
  control_.push_back(std::move(r));
  cv_.notify_all();
}

void StepStream::SendHeartbeat(int ranks_alive, bool stopping,
                               const std::map<int, char>& rank_states) {
  v1::AgentReport r;
  *r.mutable_id() = id_;
  r.mutable_heartbeat()->set_ranks_alive(ranks_alive);
  r.mutable_heartbeat()->set_stopping(stopping);
  for (const auto& [rank, state] : rank_states) {
    v1::RankProcessState* s = r.mutable_heartbeat()->add_rank_states();
    s->set_rank(rank);
    s->set_state(std::string(1, state));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) return;
  size_t heartbeats = 0;
  for (const auto& c : control_) heartbeats += c.has_heartbeat() ? 1 : 0;
  if (heartbeats >= kMaxQueuedHeartbeats) return;  // the queued ones say the same
  control_.push_back(std::move(r));
  cv_.notify_all();
}

void StepStream::SealLocked() {
  if (open_.empty()) return;
  Batch b{next_seq_++, open_.size(), {}};
  *b.report.mutable_id() = id_;
  v1::StepBatch* batch = b.report.mutable_batch();
  batch->set_seq(b.seq);
  for (auto& s : open_) *batch->add_steps() = std::move(s);
  open_.clear();
  batches_.push_back(std::move(b));
}

void StepStream::DropOldestLocked() {
  stats_.dropped += batches_.front().records;
  held_ -= batches_.front().records;
  batches_.pop_front();
}

void StepStream::OnAck(const v1::ReportAck& ack) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(batches_.begin(), batches_.end(),
                         [&](const Batch& b) { return b.seq == ack.seq(); });
  if (it == batches_.end()) return;  // dropped meanwhile, or answered twice
  switch (ack.result()) {
    case v1::ReportAck::RESULT_STORED: stats_.stored += it->records; break;
    case v1::ReportAck::RESULT_DUPLICATE: stats_.duplicate += it->records; break;
    default:
      stats_.refused += it->records;
      spdlog::warn("the controller refused {} step record(s): {}", it->records, ack.error());
      break;
  }
  held_ -= it->records;
  batches_.erase(it);
  cv_.notify_all();
}

bool StepStream::Deliver(Stream* stream, const bool* reader_done) {
  for (;;) {
    v1::AgentReport report;
    bool is_batch = false, is_control = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (;;) {
        if (abandon_ || *reader_done) return false;
        if (!open_.empty() &&
            (closing_ || clock_.SteadyNow() >= open_since_ + options_.batch_interval))
          SealLocked();
        if (!control_.empty()) {
          report = control_.front();  // popped once written (only this thread pops)
          is_control = true;
          break;
        }
        auto unsent = std::find_if(batches_.begin(), batches_.end(),
                                   [&](const Batch& b) { return b.seq > sent_upto_; });
        if (unsent != batches_.end()) {
          report = unsent->report;
          sent_upto_ = unsent->seq;
          is_batch = true;
          break;
        }
        if (closing_ && DrainedLocked()) return true;
        if (open_.empty())
          cv_.wait(lock);
        else
          WaitOnce(clock_, lock, cv_, open_since_ + options_.batch_interval - clock_.SteadyNow());
      }
    }
    if (!stream->Write(report)) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (is_batch) ++stats_.batches_sent;
    if (is_control) control_.pop_front();
  }
}

void StepStream::WaitBeforeReconnect(int retry) {
  static thread_local std::mt19937 rng(std::random_device{}());
  auto delay =
      BackoffDelay(options_.backoff, retry, std::uniform_real_distribution<double>(0, 1)(rng));
  std::unique_lock<std::mutex> lock(mu_);
  WaitFor(clock_, lock, cv_, delay, [&] { return abandon_; });
}

bool StepStream::AwaitController() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (abandon_ || (closing_ && DrainedLocked())) return false;
    }
    if (link_->WaitConnected(kStreamConnectSlice)) return true;
  }
}

void StepStream::Run() {
  for (int retry = 0;; ++retry) {
    // Wait for the link, not the call (wait_for_ready): a fail-fast call
    // fails at once while the channel reconnects to a restarted controller,
    // and the retries' backoff then outgrew the flush at exit (the kill
    // matrix, tests/e2e/kill_matrix.sh); a call waiting for ready would wait
    // on one address for good, and miss a controller that moved.
    if (!AwaitController()) break;
    grpc::ClientContext ctx;
    // The stream's call uses the stub's channel: both outlive it.
    std::shared_ptr<v1::AgentService::Stub> stub = link_->stub();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (abandon_) break;
      ctx_ = &ctx;  // Close may cancel it from here on
      sent_upto_ = 0;  // a new stream: every batch not yet stored is sent again
    }
    std::unique_ptr<Stream> stream = stub->Report(&ctx);
    bool reader_done = false;
    std::thread reader([&] {
      v1::ReportAck ack;
      while (stream->Read(&ack)) OnAck(ack);
      std::lock_guard<std::mutex> lock(mu_);
      reader_done = true;
      cv_.notify_all();
    });
    bool clean = Deliver(stream.get(), &reader_done);
    if (clean) {
      stream->WritesDone();  // the controller ends its side in turn
    } else {
      ctx.TryCancel();
    }
    reader.join();
    grpc::Status st = stream->Finish();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ctx_ = nullptr;
      if ((clean && st.ok()) || abandon_) break;
      ++stats_.reconnects;
    }
    spdlog::warn("report stream to the controller broke ({}: {}); reconnecting",
                 static_cast<int>(st.error_code()), st.error_message());
    if (clean) retry = 0;  // it had worked: start the backoff over
    WaitBeforeReconnect(retry);
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.undelivered = held_;
  done_ = true;
  cv_.notify_all();
}

void StepStream::Close(std::chrono::steady_clock::duration flush) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    closing_ = true;
    cv_.notify_all();
    if (thread_.joinable() && !WaitFor(clock_, lock, cv_, flush, [&] { return done_; })) {
      abandon_ = true;
      if (ctx_ != nullptr) ctx_->TryCancel();
      cv_.notify_all();
    }
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (!thread_.joinable() && !done_) stats_.undelivered = held_;  // never started
  if (stats_.undelivered > 0)
    spdlog::warn("{} step record(s) not stored by the controller at exit", stats_.undelivered);
}

std::vector<v1::StepBatch> StepStream::TakeUnstored() {
  std::lock_guard<std::mutex> lock(mu_);
  SealLocked();  // a stream that never started sealed nothing
  std::vector<v1::StepBatch> out;
  for (Batch& b : batches_) out.push_back(std::move(*b.report.mutable_batch()));
  batches_.clear();
  held_ = 0;
  return out;
}

StepStream::Stats StepStream::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace trellis::worker
