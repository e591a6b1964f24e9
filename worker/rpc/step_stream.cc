#include "worker/rpc/step_stream.h"

#include <random>

#include "common/log.h"
#include "worker/rpc/convert.h"

namespace trellis::worker {

StepStream::StepStream(v1::AgentService::Stub* stub, v1::WorkerIdentity id, size_t max_queued,
                       BackoffPolicy backoff)
    : stub_(stub), id_(std::move(id)), max_queued_(max_queued), backoff_(backoff) {}

StepStream::~StepStream() { Close(std::chrono::steady_clock::duration::zero()); }

void StepStream::Start() {
  thread_ = std::thread([this] { Run(); });
}

void StepStream::SendStep(int rank, const StepRecord& record) {
  v1::AgentReport r;
  r.mutable_step()->set_rank(rank);
  ToProto(record, r.mutable_step()->mutable_record());
  Enqueue(std::move(r));
}

void StepStream::SendRankExit(const RankExit& exit) {
  v1::AgentReport r;
  ToProto(exit, r.mutable_rank_exit());
  Enqueue(std::move(r));
}

void StepStream::SendHeartbeat(int ranks_alive) {
  v1::AgentReport r;
  r.mutable_heartbeat()->set_ranks_alive(ranks_alive);
  Enqueue(std::move(r));
}

void StepStream::Enqueue(v1::AgentReport report) {
  *report.mutable_id() = id_;
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) return;
  if (queue_.size() >= max_queued_) {
    // Drop the oldest step record (the freshest steps matter most); failing
    // that the oldest heartbeat. Rank exits are few and always kept.
    auto victim = std::find_if(queue_.begin(), queue_.end(),
                               [](const Item& i) { return i.report.has_step(); });
    if (victim == queue_.end())
      victim = std::find_if(queue_.begin(), queue_.end(),
                            [](const Item& i) { return i.report.has_heartbeat(); });
    if (victim != queue_.end()) {
      if (victim->report.has_step()) ++stats_.dropped;
      queue_.erase(victim);
    }
  }
  queue_.push_back({next_seq_++, std::move(report)});
  cv_.notify_all();
}

bool StepStream::Deliver(grpc::ClientWriter<v1::AgentReport>* writer) {
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || closing_ || abandon_; });
      if (abandon_ || queue_.empty()) return true;  // closing with nothing left
      item = queue_.front();
    }
    if (!writer->Write(item.report)) return false;
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.sent;
    // The item may have been dropped from a full queue while it was written.
    if (!queue_.empty() && queue_.front().seq == item.seq) queue_.pop_front();
  }
}

void StepStream::WaitBeforeReconnect(int retry) {
  static thread_local std::mt19937 rng(std::random_device{}());
  auto delay = BackoffDelay(backoff_, retry, std::uniform_real_distribution<double>(0, 1)(rng));
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, delay, [&] { return abandon_; });
}

void StepStream::Run() {
  for (int retry = 0;; ++retry) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (abandon_ || (closing_ && queue_.empty() && retry > 0)) break;
    }
    grpc::ClientContext ctx;
    v1::StreamStepsResponse resp;
    std::unique_ptr<grpc::ClientWriter<v1::AgentReport>> writer = stub_->StreamSteps(&ctx, &resp);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ctx_ = &ctx;
      if (abandon_) ctx.TryCancel();
    }
    bool clean = Deliver(writer.get());
    if (clean) writer->WritesDone();
    grpc::Status st = writer->Finish();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ctx_ = nullptr;
      if (clean && st.ok()) break;
      if (abandon_) break;
      ++stats_.reconnects;
    }
    spdlog::warn("step stream to the controller broke ({}: {}); reconnecting",
                 static_cast<int>(st.error_code()), st.error_message());
    if (clean) retry = 0;  // it had worked: start the backoff over
    WaitBeforeReconnect(retry);
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.undelivered = queue_.size();
  done_ = true;
  cv_.notify_all();
}

void StepStream::Close(std::chrono::steady_clock::duration flush) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    closing_ = true;
    cv_.notify_all();
    if (thread_.joinable() && !cv_.wait_for(lock, flush, [&] { return done_; })) {
      abandon_ = true;
      if (ctx_ != nullptr) ctx_->TryCancel();
      cv_.notify_all();
    }
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (stats_.undelivered > 0)
    spdlog::warn("{} report(s) to the controller not delivered at exit", stats_.undelivered);
}

StepStream::Stats StepStream::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace trellis::worker
