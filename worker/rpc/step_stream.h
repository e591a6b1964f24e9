#pragma once
// The StreamSteps client stream, on its own thread: step records, rank exits
// and heartbeats go into a bounded queue (when full, the oldest step record is
// dropped and counted); one write is in flight at a time; a broken stream is
// reopened with capped backoff for as long as the worker runs, so a restarting
// controller costs records, never the training.

#include <grpcpp/client_context.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "common/step_record.h"
#include "trellis/v1/agent.grpc.pb.h"
#include "worker/core/outcome.h"
#include "worker/core/retry.h"

namespace trellis::worker {

class StepStream {
 public:
  struct Stats {
    uint64_t sent = 0;
    uint64_t dropped = 0;  // step records dropped because the queue was full
    uint64_t reconnects = 0;
    uint64_t undelivered = 0;  // left in the queue at Close
  };

  StepStream(v1::AgentService::Stub* stub, v1::WorkerIdentity id, size_t max_queued,
             BackoffPolicy backoff = {});
  ~StepStream();  // Close(0) if still open
  StepStream(const StepStream&) = delete;
  StepStream& operator=(const StepStream&) = delete;

  void Start();
  // Thread-safe, never block.
  void SendStep(int rank, const StepRecord& record);
  void SendRankExit(const RankExit& exit);
  void SendHeartbeat(int ranks_alive);

  // Delivers what is queued, within `flush`, then ends the stream.
  void Close(std::chrono::steady_clock::duration flush);

  Stats stats() const;

 private:
  struct Item {
    uint64_t seq;
    v1::AgentReport report;
  };
  void Enqueue(v1::AgentReport report);
  void Run();
  bool Deliver(grpc::ClientWriter<v1::AgentReport>* writer);
  void WaitBeforeReconnect(int retry);

  v1::AgentService::Stub* stub_;
  v1::WorkerIdentity id_;
  size_t max_queued_;
  BackoffPolicy backoff_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  uint64_t next_seq_ = 0;
  bool closing_ = false;
  bool abandon_ = false;  // Close's flush time is over
  bool done_ = false;
  grpc::ClientContext* ctx_ = nullptr;  // the open stream's, for TryCancel
  Stats stats_;
  std::thread thread_;
};

}  // namespace trellis::worker
