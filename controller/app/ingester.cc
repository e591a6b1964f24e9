#include "controller/app/ingester.h"

#include "common/log.h"

namespace trellis::controller {

absl::StatusOr<std::unique_ptr<Ingester>> Ingester::Start(Options options, Clock* clock,
                                                          IngestMetrics* metrics, Stored stored) {
  auto writer = StepWriter::Open(options.db_path, options.journal, options.may_commit);
  if (!writer.ok()) return writer.status();
  return std::unique_ptr<Ingester>(
      new Ingester(std::move(options), clock, metrics, std::move(stored), std::move(*writer)));
}

Ingester::Ingester(Options options, Clock* clock, IngestMetrics* metrics, Stored stored,
                   std::unique_ptr<StepWriter> writer)
    : options_(std::move(options)),
      clock_(clock),
      metrics_(metrics),
      stored_(std::move(stored)),
      writer_(std::move(writer)) {
  thread_ = std::thread([this] { Run(); });
}

Ingester::~Ingester() { Stop(); }

void Ingester::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Ingester::Submit(StepBatch batch, Done done) {
  size_t records = batch.records.size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queued_records_ + records > options_.max_queued_records) return false;
    queued_records_ += records;
    queue_.push_back({std::move(batch), std::move(done), std::chrono::steady_clock::now()});
    metrics_->SetQueued(queue_.size(), queued_records_);
  }
  cv_.notify_one();
  return true;
}

void Ingester::Run() {
  using Steady = std::chrono::steady_clock;
  Steady::time_point next_prune = Steady::now() + options_.prune_every;
  for (;;) {
    std::vector<Item> items;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, next_prune, [&] { return !queue_.empty() || stopping_; });
      // Whole batches, up to max_commit_records (at least one).
      size_t records = 0;
      while (!queue_.empty() && (items.empty() || records + queue_.front().batch.records.size() <=
                                                       options_.max_commit_records)) {
        records += queue_.front().batch.records.size();
        items.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      queued_records_ -= records;
      metrics_->SetQueued(queue_.size(), queued_records_);
      if (items.empty() && stopping_) return;
    }
    if (!items.empty()) CommitBatch(std::move(items));
    if (Steady::now() >= next_prune) {
      auto pruned = writer_->Prune(options_.retention);
      if (pruned.ok())
        metrics_->Pruned(*pruned);
      else
        spdlog::warn("step retention: prune failed: {}", std::string(pruned.status().message()));
      next_prune = Steady::now() + options_.prune_every;
    }
  }
}

void Ingester::CommitBatch(std::vector<Item> items) {
  std::vector<const StepBatch*> batches;
  size_t records = 0;
  for (const Item& i : items) {
    batches.push_back(&i.batch);
    records += i.batch.records.size();
  }
  auto start = std::chrono::steady_clock::now();
  auto outcome = writer_->Commit(batches, clock_->Now());
  auto committed = std::chrono::steady_clock::now();
  if (!outcome.ok()) {
    metrics_->CommitFailed();
    spdlog::warn("step pipeline: {} batch(es) not stored: {}", items.size(),
                 std::string(outcome.status().message()));
    for (Item& i : items) i.done(outcome.status());
    return;
  }
  metrics_->ObserveCommit(committed - start, records);
  std::vector<StepBatch> stored;
  std::vector<std::pair<Done, BatchResult>> answers;
  for (size_t k = 0; k < items.size(); ++k) {
    BatchResult r = outcome->results[k];
    metrics_->Batch(r == BatchResult::kStored ? IngestResult::kStored : IngestResult::kDuplicate,
                    items[k].batch.records.size());
    metrics_->ObserveLatency(committed - items[k].received);
    answers.emplace_back(std::move(items[k].done), r);
    if (r == BatchResult::kStored) stored.push_back(std::move(items[k].batch));
  }
  stored_(std::move(stored), std::move(outcome->rows));
  for (auto& [done, result] : answers) done(result);
}

}  // namespace trellis::controller
