#include "trainer_core/checkpoint/pruner.h"

#include <unistd.h>

#include <algorithm>

#include "common/checkpoint_layout.h"
#include "trainer_core/error.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

bool IsPrunedName(const std::string& name) { return name.rfind(kPrunedPrefix, 0) == 0; }

}  // namespace

std::vector<std::string> ChoosePruned(const std::vector<CheckpointDirEntry>& entries,
                                      int64_t completed, int keep) {
  std::vector<int64_t> kept_candidates;  // complete, up to `completed`
  for (const auto& e : entries)
    if (e.step && e.complete && *e.step <= completed) kept_candidates.push_back(*e.step);
  std::sort(kept_candidates.rbegin(), kept_candidates.rend());
  const int64_t oldest_kept =
      kept_candidates.empty()
          ? completed
          : kept_candidates[std::min<size_t>(std::max(keep, 1), kept_candidates.size()) - 1];
  std::vector<std::string> pruned;
  for (const auto& e : entries) {
    if (IsPrunedName(e.name)) {
      pruned.push_back(e.name);
    } else if (e.step && *e.step < oldest_kept) {
      pruned.push_back(e.name);  // complete beyond `keep`, or never to complete
    } else if (e.step && !e.complete && *e.step < completed) {
      pruned.push_back(e.name);  // abandoned between the kept ones
    }
  }
  return pruned;
}

CheckpointPruner::~CheckpointPruner() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return pending_.empty(); });
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CheckpointPruner::Prune(const std::string& dir, int64_t completed, int keep) {
  ThrowIfFailed();
  std::vector<CheckpointDirEntry> entries;
  for (const auto& name : ListDir(dir)) {
    const auto step = ParseCheckpointStepDir(name);
    entries.push_back(
        {name, step, step && PathExists(JoinPath(JoinPath(dir, name), "manifest.json"))});
  }
  std::vector<std::string> ready;  // renamed, to remove
  for (const auto& name : ChoosePruned(entries, completed, keep)) {
    const std::string from = JoinPath(dir, name);
    if (IsPrunedName(name)) {
      ready.push_back(from);
      continue;
    }
    const std::string to =
        JoinPath(dir, std::string(kPrunedPrefix) + name + "-" + std::to_string(::getpid()) + "-" +
                          std::to_string(++renamed_));
    RenamePath(from, to);
    ready.push_back(to);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& path : ready)
      if (pending_.insert(path).second) queue_.push_back(std::move(path));
    if (!thread_.joinable() && !queue_.empty())
      thread_ = std::thread([this] { RemoveQueued(); });
  }
  changed_.notify_all();
}

void CheckpointPruner::Wait() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return pending_.empty(); });
  }
  ThrowIfFailed();
}

void CheckpointPruner::ThrowIfFailed() {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.empty()) return;
  const std::string why = std::move(error_);
  error_.clear();
  throw TrainError("checkpoint prune: " + why);
}

void CheckpointPruner::RemoveQueued() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const std::string path = queue_.front();
    queue_.pop_front();
    lock.unlock();
    std::string why;
    try {
      remove_(path);
    } catch (const std::exception& e) {
      why = e.what();
    }
    lock.lock();
    if (!why.empty() && error_.empty()) error_ = why;
    pending_.erase(path);
    changed_.notify_all();
  }
}

}  // namespace trellis::train
