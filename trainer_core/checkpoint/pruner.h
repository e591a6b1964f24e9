#pragma once
// Removing old checkpoints off the step's path. Removing a step directory
// of several GiB per rank takes seconds, and rank 0 did it while every rank
// stood in the save's last barrier. Now each directory to go is first
// renamed out of the checkpoint namespace (one rename, so neither a resume
// nor the controller ever sees a half-removed step), and a thread of the
// pruner removes it while training goes on. A name left behind by a process
// that died mid-removal (".pruned-...") is taken up by the next Prune.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "trainer_core/files.h"

namespace trellis::train {

// One entry of a checkpoint directory, as the choice below sees it.
struct CheckpointDirEntry {
  std::string name;
  std::optional<int64_t> step;  // a step directory's; none for anything else
  bool complete = false;        // it has a manifest
};

// Which entries go once step `completed` is complete: the complete steps
// older than the newest `keep` of those up to `completed`; the incomplete
// steps older than `completed` (saves abandoned or cut short: nothing will
// complete them, as saves complete in step order); leftovers of an earlier
// prune. Steps newer than `completed` (left by a run that went further
// before this one resumed from an older step) are not touched.
std::vector<std::string> ChoosePruned(const std::vector<CheckpointDirEntry>& entries,
                                      int64_t completed, int keep);

// The name a directory is renamed to before its removal.
inline constexpr const char* kPrunedPrefix = ".pruned-";

class CheckpointPruner {
 public:
  // `remove` removes a tree (RemoveTree; a test's may fail on purpose).
  explicit CheckpointPruner(std::function<void(const std::string&)> remove = RemoveTree)
      : remove_(std::move(remove)) {}
  // Waits for the removals queued: a run's directory holds only its kept
  // checkpoints once the trainer is gone.
  ~CheckpointPruner();
  CheckpointPruner(const CheckpointPruner&) = delete;
  CheckpointPruner& operator=(const CheckpointPruner&) = delete;

  // Renames what ChoosePruned picks in `dir` and queues it for removal.
  // Throws TrainError when a rename fails, or when an earlier removal did
  // (naming the path): old checkpoints are not left to fill the disk
  // unseen.
  void Prune(const std::string& dir, int64_t completed, int keep);
  // Until every queued removal is done; throws as Prune does.
  void Wait();

 private:
  void RemoveQueued();
  void ThrowIfFailed();

  const std::function<void(const std::string&)> remove_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::string> queue_;  // renamed paths, to remove
  std::set<std::string> pending_;  // queued or being removed
  bool stopping_ = false;
  std::string error_;
  uint64_t renamed_ = 0;           // makes each renamed name unique
  std::thread thread_;
};

}  // namespace trellis::train
