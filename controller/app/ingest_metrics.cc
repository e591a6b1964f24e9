#include "controller/app/ingest_metrics.h"

#include "common/clock.h"

namespace trellis::controller {

namespace {

constexpr const char* kResults[] = {"stored", "duplicate", "refused"};
constexpr BatchFault kFaults[] = {BatchFault::kEmpty, BatchFault::kOversized, BatchFault::kBadSeq,
                                  BatchFault::kBadRank, BatchFault::kBadRecord};

}  // namespace

IngestMetrics::IngestMetrics(prometheus::Registry& registry) {
  auto& batches = prometheus::BuildCounter()
                      .Name("trellis_ingest_batches_total")
                      .Help("Batches of step records from workers, by result")
                      .Register(registry);
  auto& records = prometheus::BuildCounter()
                      .Name("trellis_ingest_records_total")
                      .Help("Step records from workers, by the result of their batch")
                      .Register(registry);
  for (size_t i = 0; i < batches_.size(); ++i) {
    batches_[i] = &batches.Add({{"result", kResults[i]}});
    records_[i] = &records.Add({{"result", kResults[i]}});
  }
  auto& refused = prometheus::BuildCounter()
                      .Name("trellis_ingest_refused_batches_total")
                      .Help("Batches refused whole (nothing stored), by what was wrong")
                      .Register(registry);
  for (size_t i = 0; i < refused_.size(); ++i)
    refused_[i] = &refused.Add({{"fault", BatchFaultName(kFaults[i])}});
  queued_batches_ = &prometheus::BuildGauge()
                         .Name("trellis_ingest_queued_batches")
                         .Help("Batches received and not yet committed")
                         .Register(registry)
                         .Add({});
  queued_records_ = &prometheus::BuildGauge()
                         .Name("trellis_ingest_queued_records")
                         .Help("Step records received and not yet committed")
                         .Register(registry)
                         .Add({});
  latency_ = &prometheus::BuildHistogram()
                  .Name("trellis_ingest_latency_seconds")
                  .Help("From a batch's arrival to its commit")
                  .Register(registry)
                  .Add({}, prometheus::Histogram::BucketBoundaries{
                               0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5});
  commit_ = &prometheus::BuildHistogram()
                 .Name("trellis_ingest_commit_seconds")
                 .Help("Time of one transaction of the step pipeline")
                 .Register(registry)
                 .Add({}, prometheus::Histogram::BucketBoundaries{
                              0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1});
  commit_records_ = &prometheus::BuildHistogram()
                         .Name("trellis_ingest_commit_records")
                         .Help("Step records in one transaction of the step pipeline")
                         .Register(registry)
                         .Add({}, prometheus::Histogram::BucketBoundaries{
                                      1, 4, 16, 64, 256, 1024, 4096, 16384, 65536});
  commit_failures_ = &prometheus::BuildCounter()
                          .Name("trellis_ingest_commit_failures_total")
                          .Help("Transactions of the step pipeline that failed (their batches "
                                "are sent again by the workers)")
                          .Register(registry)
                          .Add({});
  pruned_ = &prometheus::BuildCounter()
                 .Name("trellis_ingest_pruned_rows_total")
                 .Help("Step summary rows deleted by the retention policy")
                 .Register(registry)
                 .Add({});
}

void IngestMetrics::Batch(IngestResult result, size_t records) {
  batches_[static_cast<size_t>(result)]->Increment();
  records_[static_cast<size_t>(result)]->Increment(static_cast<double>(records));
}

void IngestMetrics::Refused(BatchFault fault) {
  refused_[static_cast<size_t>(fault)]->Increment();
}

void IngestMetrics::SetQueued(size_t batches, size_t records) {
  queued_batches_->Set(static_cast<double>(batches));
  queued_records_->Set(static_cast<double>(records));
}

void IngestMetrics::ObserveLatency(std::chrono::steady_clock::duration d) {
  latency_->Observe(SecondsOf(d));
}

void IngestMetrics::ObserveCommit(std::chrono::steady_clock::duration d, size_t records) {
  commit_->Observe(SecondsOf(d));
  commit_records_->Observe(static_cast<double>(records));
}

void IngestMetrics::CommitFailed() { commit_failures_->Increment(); }

void IngestMetrics::Pruned(int64_t rows) { pruned_->Increment(static_cast<double>(rows)); }

}  // namespace trellis::controller
