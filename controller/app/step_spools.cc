#include "controller/app/step_spools.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "common/log.h"
#include "common/run_layout.h"

namespace trellis::controller {

namespace fs = std::filesystem;

void StepSpools::Add(const std::string& run_dir, const BatchSource& source) {
  Spool& spool = spools_[source];
  spool.path = StepSpoolPath(run_dir, source.attempt, source.launch, source.node);
  spool.unreadable = false;  // told again: read again
  if (!spool.in_flight) Try(source, spool);
}

void StepSpools::Scan(const std::string& run_id, const std::string& run_dir) {
  std::error_code ec;
  for (const auto& attempt : fs::directory_iterator(run_dir, ec)) {
    int a = 0, l = 0;
    if (std::sscanf(attempt.path().filename().c_str(), "attempt-%d", &a) != 1) continue;
    std::error_code ec2;
    for (const auto& launch : fs::directory_iterator(attempt.path(), ec2)) {
      if (std::sscanf(launch.path().filename().c_str(), "launch-%d", &l) != 1) continue;
      std::error_code ec3;
      for (const auto& file : fs::directory_iterator(launch.path(), ec3)) {
        const std::string name = file.path().filename().string();
        static const std::string kPrefix = "steps-spool-", kSuffix = ".jsonl";
        if (name.size() <= kPrefix.size() + kSuffix.size() || name.rfind(kPrefix, 0) != 0 ||
            name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
          continue;
        const std::string node =
            name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
        spdlog::info("run {}: a step spool left from before: {}", run_id, file.path().string());
        Add(run_dir, {run_id, a, l, node});
      }
    }
  }
}

void StepSpools::TryAll() {
  // Try may forget a spool: the keys first.
  std::vector<BatchSource> due;
  for (const auto& [source, spool] : spools_)
    if (!spool.in_flight && !spool.unreadable) due.push_back(source);
  for (const BatchSource& source : due)
    if (auto it = spools_.find(source); it != spools_.end()) Try(source, it->second);
}

void StepSpools::Try(const BatchSource& source, Spool& spool) {
  absl::StatusOr<std::vector<StepBatch>> batches = read_(spool.path, source);
  if (!batches.ok()) {
    if (absl::IsNotFound(batches.status())) {
      spools_.erase(source);  // stored and removed before, or never written
      return;
    }
    // Kept for people, counted unknown, and not read again until a worker
    // or a restart names it again (a corrupt file stays corrupt).
    spdlog::warn("step spool not stored: {}", std::string(batches.status().message()));
    spool.unreadable = true;
    return;
  }
  spool.records = 0;
  for (const StepBatch& b : *batches) spool.records += static_cast<int64_t>(b.records.size());
  if (batches->empty()) {
    Answered(source, true);
    return;
  }
  spool.in_flight = true;
  flights_[source] = {batches->size(), true};
  for (StepBatch& b : *batches) {
    bool taken = submit_(std::move(b), [this, source](absl::StatusOr<BatchResult> r) {
      bool ok = r.ok();
      post_([this, source, ok] { Answered(source, ok); });
    });
    if (!taken) post_([this, source] { Answered(source, false); });
  }
}

void StepSpools::Answered(const BatchSource& source, bool stored) {
  auto spool = spools_.find(source);
  if (spool == spools_.end()) return;
  auto flight = flights_.find(source);
  if (flight != flights_.end()) {
    flight->second.all_stored = flight->second.all_stored && stored;
    if (--flight->second.left > 0) return;
    stored = flight->second.all_stored;
    flights_.erase(flight);
  }
  spool->second.in_flight = false;
  if (!stored) return;  // tried again with the next TryAll
  std::error_code ec;
  fs::remove(spool->second.path, ec);
  spdlog::info("run {}: {} spooled step record(s) of {} stored{}", source.run_id,
               spool->second.records, source.node,
               ec ? "; the spool stays (" + ec.message() + ")" : "");
  spools_.erase(spool);
}

int64_t StepSpools::Pending(const std::string& run_id) const {
  int64_t n = 0;
  for (const auto& [source, spool] : spools_)
    if (source.run_id == run_id) n += std::max<int64_t>(spool.records, 0);
  return n;
}

int64_t StepSpools::Total() const {
  int64_t n = 0;
  for (const auto& [source, spool] : spools_) n += std::max<int64_t>(spool.records, 0);
  return n;
}

}  // namespace trellis::controller
