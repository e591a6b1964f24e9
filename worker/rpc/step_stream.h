#pragma once
// The worker's end of the step pipeline (docs/architecture.md, "The step
// pipeline"): the Report stream, on threads of its own. Step records are
// gathered into numbered batches (sealed at max_batch_records or after
// batch_interval); each batch is kept until the controller answers that it is
// stored, and sent again, unchanged, on the next stream when one breaks, so a
// restarting controller costs no record. At most max_held records are kept:
// beyond that the oldest batch is dropped and counted. Rank exits and
// heartbeats go on the same stream, unanswered. A broken stream is reopened
// with capped backoff for as long as the worker runs, each time once the
// controller link connects (to wherever the controller now is,
// worker/rpc/controller_link.h). The batch interval, the backoff and Close's
// flush are timed by the caller's Clock.

#include <grpcpp/client_context.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/step_record.h"
#include "trellis/v1/agent.grpc.pb.h"
#include "worker/core/outcome.h"
#include "worker/core/retry.h"
#include "worker/rpc/controller_link.h"

namespace trellis::worker {

class StepStream {
 public:
  struct Options {
    size_t max_held = 65536;  // records kept until stored
    size_t max_batch_records = 512;
    std::chrono::milliseconds batch_interval{200};
    BackoffPolicy backoff;
  };
  struct Stats {
    uint64_t stored = 0;     // records the controller stored
    uint64_t duplicate = 0;  // records of batches it had stored already
    uint64_t refused = 0;    // records of batches it refused (logged)
    uint64_t dropped = 0;    // records dropped because max_held was reached
    uint64_t batches_sent = 0;  // writes of a batch, first or again
    uint64_t reconnects = 0;
    uint64_t undelivered = 0;  // records not stored at Close
  };

  StepStream(std::shared_ptr<ControllerLink> link, v1::WorkerIdentity id, Options options,
             Clock& clock);
  ~StepStream();  // Close(0) if still open
  StepStream(const StepStream&) = delete;
  StepStream& operator=(const StepStream&) = delete;

  void Start();
  // Thread-safe, never block.
  void SendStep(int rank, const StepRecord& record);
  void SendRankExit(const RankExit& exit);
  void SendHeartbeat(int ranks_alive, bool stopping = false,
                     const std::map<int, char>& rank_states = {});

  // Waits, within `flush`, until every batch is stored and every report
  // sent, then ends the stream.
  void Close(std::chrono::steady_clock::duration flush);
  // After Close: the batches the controller never said it stored, oldest
  // first (for the spool file, worker/rpc/step_spool_file.h); empty after.
  std::vector<v1::StepBatch> TakeUnstored();

  Stats stats() const;

 private:
  struct Batch {
    uint64_t seq;
    size_t records;
    v1::AgentReport report;
  };
  using Stream = grpc::ClientReaderWriter<v1::AgentReport, v1::ReportAck>;
  // Under mu_.
  void SealLocked();
  void DropOldestLocked();
  bool DrainedLocked() const { return open_.empty() && batches_.empty() && control_.empty(); }
  void OnAck(const v1::ReportAck& ack);
  // Writes until the stream breaks (false) or everything is stored at Close (true).
  bool Deliver(Stream* stream, const bool* reader_done);
  void Run();
  // Before each stream: true once the link connects; false when Close's
  // flush is over, or Close found nothing left to send.
  bool AwaitController();
  void WaitBeforeReconnect(int retry);

  std::shared_ptr<ControllerLink> link_;
  v1::WorkerIdentity id_;
  Options options_;
  Clock& clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<v1::RankStep> open_;  // the batch being filled
  SteadyTime open_since_;
  std::deque<Batch> batches_;  // sealed, not yet stored, by seq
  size_t held_ = 0;            // records in open_ and batches_
  uint64_t next_seq_ = 1;
  uint64_t sent_upto_ = 0;  // batches up to this seq were written on the open stream
  std::deque<v1::AgentReport> control_;  // rank exits and heartbeats to send
  bool closing_ = false;
  bool abandon_ = false;  // Close's flush time is over
  bool done_ = false;
  grpc::ClientContext* ctx_ = nullptr;  // the open stream's, for TryCancel
  Stats stats_;
  std::thread thread_;
};

}  // namespace trellis::worker
