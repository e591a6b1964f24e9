#pragma once
// The step pipeline's controller end (docs/architecture.md, "The step
// pipeline"): batches checked on gRPC's threads wait in one queue; a thread
// of its own takes everything queued (up to max_commit_records) and stores it
// in one transaction (StepWriter), then hands what was stored to the loop
// thread and answers each batch. The loop thread never waits for a step
// write, and a worker hears "stored" only after the commit.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "controller/app/ingest_metrics.h"
#include "controller/store/step_writer.h"

namespace trellis::controller {

class Ingester {
 public:
  struct Options {
    std::string db_path;
    // The store's (its journal must be the same on every connection).
    sqlite::Journal journal = sqlite::Journal::kWal;
    sqlite::Db::CommitGuard may_commit;
    StepRetention retention;
    std::chrono::milliseconds prune_every{60000};
    // Beyond this many queued records Submit says no; the worker keeps its
    // batches and sends them again later.
    size_t max_queued_records = 1 << 20;
    size_t max_commit_records = 1 << 16;
  };
  // A batch's answer, on the ingest thread: an error when its transaction
  // failed (nothing of it stored; it may be sent again).
  using Done = std::function<void(absl::StatusOr<BatchResult>)>;
  // What one transaction stored, on the ingest thread, before any Done of
  // its batches: the batches (duplicates left out) and the step rows as
  // they now stand.
  using Stored = std::function<void(std::vector<StepBatch>, std::vector<StoredStep>)>;

  static absl::StatusOr<std::unique_ptr<Ingester>> Start(Options options, Clock* clock,
                                                         IngestMetrics* metrics, Stored stored);
  // Stop()s.
  ~Ingester();
  Ingester(const Ingester&) = delete;
  Ingester& operator=(const Ingester&) = delete;

  // A batch that passed CheckBatch. False (and `done` dropped) when the
  // queue is full or the ingester stopped.
  bool Submit(StepBatch batch, Done done);
  // Commits what is queued, then ends the thread.
  void Stop();

 private:
  struct Item {
    StepBatch batch;
    Done done;
    std::chrono::steady_clock::time_point received;
  };
  Ingester(Options options, Clock* clock, IngestMetrics* metrics, Stored stored,
           std::unique_ptr<StepWriter> writer);
  void Run();
  void CommitBatch(std::vector<Item> items);

  const Options options_;
  Clock* clock_;
  IngestMetrics* metrics_;
  Stored stored_;
  std::unique_ptr<StepWriter> writer_;  // the ingest thread's only

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  size_t queued_records_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace trellis::controller
