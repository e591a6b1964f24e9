#pragma once
// The step pipeline's own figures on the controller's /metrics: batches and
// records by result, refusals by fault, the queue, the time from a batch's
// arrival to its commit, commit time and size, rows pruned. Any thread
// (prometheus-cpp locks each metric); every series exists from the start.

#include <array>
#include <chrono>
#include <memory>

#include "controller/core/step_batch.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace trellis::controller {

enum class IngestResult { kStored, kDuplicate, kRefused };

class IngestMetrics {
 public:
  explicit IngestMetrics(prometheus::Registry& registry);

  void Batch(IngestResult result, size_t records);
  void Refused(BatchFault fault);
  void SetQueued(size_t batches, size_t records);
  // From a batch's arrival to its commit.
  void ObserveLatency(std::chrono::steady_clock::duration d);
  void ObserveCommit(std::chrono::steady_clock::duration d, size_t records);
  void CommitFailed();
  void Pruned(int64_t rows);

 private:
  std::array<prometheus::Counter*, 3> batches_{};
  std::array<prometheus::Counter*, 3> records_{};
  std::array<prometheus::Counter*, 5> refused_{};
  prometheus::Gauge* queued_batches_;
  prometheus::Gauge* queued_records_;
  prometheus::Histogram* latency_;
  prometheus::Histogram* commit_;
  prometheus::Histogram* commit_records_;
  prometheus::Counter* commit_failures_;
  prometheus::Counter* pruned_;
};

}  // namespace trellis::controller
