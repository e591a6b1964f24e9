#pragma once
// A checkpoint written behind the training steps (`checkpoint.async`).
// Begin copies this rank's state into host memory (pinned where it comes
// from a GPU, copied on a stream of its own behind the step's work, so the
// host does not wait for it; the step's own small reads to the host go
// through the host memory's mapping, compat::ReadToHost, so as not to queue
// behind it on the copy engine) and a thread writes the shard from that copy
// while the steps go on. Poll, at each step boundary while a save is in
// flight, completes the step (manifest, prune) once every rank's shard is on
// disk. A step counts only when its manifest exists, so a rank that dies
// before that leaves the previous checkpoint the newest, as with a save in
// place.
//
// The cost is host memory: a copy of the rank's state (its shard), one
// arena of exactly that size (memory/host_arena.h), made by Prepare in a
// thread of its own while the first steps run and kept for every save
// (host_bytes()).

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "trainer_core/checkpoint/checkpoint.h"
#include "trainer_core/checkpoint/pruner.h"
#include "trainer_core/compat_device_time.h"
#include "trainer_core/memory/host_arena.h"
#include "trainer_core/memory/host_room.h"

namespace trellis::train {

class AsyncCheckpointWriter {
 public:
  // `cuda`: the state lives on a GPU (its copies then go on a stream of their own).
  // `pruner` (may be null: pruned in place) removes the old checkpoints.
  AsyncCheckpointWriter(std::string dir, spec::TrainerSpec spec, int keep, Sharding sharding,
                        bool cuda, CheckpointPruner* pruner = nullptr);
  // Cancels a write in flight and waits for its thread: that step stays
  // incomplete (no manifest), and its unfinished shard file is removed.
  ~AsyncCheckpointWriter();
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  struct Completed {
    int64_t step = 0;
    uint64_t bytes = 0;        // this rank's shard
    double write_seconds = 0;  // from Begin to the step's completion
    double stood_seconds = 0;  // of those, the time the rank's steps waited for it
    // The first save only: how long the host copy's arena took to make
    // (beside the first steps, when Prepare was called), 0 after.
    double arena_seconds = 0;
    // From Begin until a GPU's tensors were all in host memory (0 without a GPU).
    double copy_seconds = 0;
  };

  // Starts making the host copy's arena for a state shaped as `state`, in a
  // thread of its own (Begin waits for it). Without it the first Begin
  // makes it.
  void Prepare(const NamedTensors& state);

  // Collective. A save still in flight is completed first (waited for, and
  // returned). Then the state is copied and its shard's write started.
  std::optional<Completed> Begin(const CheckpointMeta& meta, const NamedTensors& state);
  // Call before the state's tensors are next written (the optimizer step):
  // on a GPU the current stream then waits, on the device, for the copy.
  void BeforeStateChanges();
  // Collective, at every step boundary on every rank while in_flight(): one
  // all-reduce of two flags. Returns the save once every rank's shard is
  // written (with `wait`, blocks until then). Throws TrainError, on every
  // rank, when any rank's write failed; the step is then left incomplete.
  std::optional<Completed> Poll(bool wait);
  // Cancels the write in flight and waits for its thread; returns its step.
  // For a newer checkpoint about to be written in place (the last of a run,
  // or at a stop), which the write would only delay. Not collective: every
  // rank must decide it alike. The abandoned step stays incomplete (the
  // next prune removes it).
  std::optional<int64_t> Abandon();
  bool in_flight() const { return in_flight_; }
  int64_t step_in_flight() const { return in_flight_ ? meta_.step : -1; }
  // Host memory the copy of the state holds (kept between saves).
  uint64_t host_bytes() const { return arena_bytes_.load(); }
  // What a copy of `state` will hold.
  static int64_t CopyBytes(const NamedTensors& state);

 private:
  void TakeCopy(const NamedTensors& state);
  void JoinWriter();
  void AwaitArena(const NamedTensors& state);

  // Where each tensor of the state goes in the arena.
  struct Slot {
    std::string name;
    torch::ScalarType dtype;
    std::vector<int64_t> sizes;
    int64_t offset = 0, bytes = 0;
  };
  static std::vector<Slot> Layout(const NamedTensors& state, int64_t* total);

  const std::string dir_;
  const spec::TrainerSpec spec_;
  const int keep_;
  const Sharding sharding_;
  CheckpointPruner* const pruner_;

  std::vector<Slot> layout_;
  std::unique_ptr<HostArena> arena_;
  std::thread preparing_;                 // making arena_ (Prepare)
  std::string prepare_error_;             // set by that thread when it failed
  double arena_seconds_ = 0;              // how long making it took; reported once
  std::atomic<uint64_t> arena_bytes_{0};  // arena_'s size, read from any thread
  NamedTensors copy_;                     // views of arena_, one per state tensor
  compat::SideStream copy_stream_;
  compat::DeviceStamp copied_;  // when the device-to-host copies end
  bool copy_awaited_ = true;    // BeforeStateChanges has made the stream wait

  bool in_flight_ = false;
  CheckpointMeta meta_;
  std::chrono::steady_clock::time_point began_;
  double stood_seconds_ = 0;
  std::thread writer_;
  std::atomic<bool> written_{false}, cancel_{false};
  ShardWritten result_;      // set by the writer before written_
  double copy_seconds_ = 0;  // likewise
  std::string error_;        // likewise, when the write failed
};

// Empty when a host copy of `state`, and `also` bytes the rank will take
// beside it (activation offload's arena), fit the host memory this rank may
// still take (`bounds`, memory/host_room.h, each with the ranks that make the
// same copy from it) with `keep_free` bytes left; else why not.
std::string WhyTheCopyDoesNotFit(const NamedTensors& state, int64_t also, int64_t keep_free,
                                 const std::vector<MemoryBound>& bounds);

// "checkpoint step 10 written behind the steps in 4.2 s: 3.10 GiB (0.74 GiB/s,
// ...); the steps waited 0.04 s for it", for the rank's log.
std::string DescribeSaveBehind(const AsyncCheckpointWriter::Completed& c);

}  // namespace trellis::train
