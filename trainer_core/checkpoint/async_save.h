#pragma once
// A checkpoint written behind the training steps (`checkpoint.async`).
// Begin copies this rank's state into host memory (pinned where it comes
// from a GPU, copied on a stream of its own behind the step's work, so the
// host does not wait for it) and a thread writes the shard from that copy
// while the steps go on. Poll, at each step boundary while a save is in
// flight, completes the step (manifest, prune) once every rank's shard is on
// disk. A step counts only when its manifest exists, so a rank that dies
// before that leaves the previous checkpoint the newest, as with a save in
// place.
//
// The cost is host memory: a copy of the rank's state (its shard), kept
// from the first save on for the next ones (host_bytes()).

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "trainer_core/checkpoint/checkpoint.h"
#include "trainer_core/compat.h"

namespace trellis::train {

class AsyncCheckpointWriter {
 public:
  // `cuda`: the state lives on a GPU (its copies then go on a stream of their own).
  AsyncCheckpointWriter(std::string dir, spec::TrainerSpec spec, int keep, Sharding sharding,
                        bool cuda);
  // Cancels a write in flight and waits for its thread: that step stays
  // incomplete (no manifest), and its unfinished shard file is removed.
  ~AsyncCheckpointWriter();
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  struct Completed {
    int64_t step = 0;
    uint64_t bytes = 0;          // this rank's shard
    double write_seconds = 0;    // from Begin to the step's completion
    double stood_seconds = 0;    // of those, the time the rank's steps waited for it
  };

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
  bool in_flight() const { return in_flight_; }
  // Host memory the copy of the state holds (kept between saves).
  uint64_t host_bytes() const;

 private:
  void TakeCopy(const NamedTensors& state);
  void JoinWriter();

  const std::string dir_;
  const spec::TrainerSpec spec_;
  const int keep_;
  const Sharding sharding_;

  NamedTensors copy_;           // host tensors, reused when the shapes match
  compat::SideStream copy_stream_;
  compat::DeviceStamp copied_;  // when the device-to-host copies end
  bool copy_awaited_ = true;    // BeforeStateChanges has made the stream wait

  bool in_flight_ = false;
  CheckpointMeta meta_;
  std::chrono::steady_clock::time_point began_;
  double stood_seconds_ = 0;
  std::thread writer_;
  std::atomic<bool> written_{false}, cancel_{false};
  ShardWritten result_;  // set by the writer before written_
  std::string error_;    // likewise, when the write failed
};

// "checkpoint step 10 written behind the steps in 4.2 s: 3.10 GiB (0.74 GiB/s,
// ...); the steps waited 0.04 s for it", for the rank's log.
std::string DescribeSaveBehind(const AsyncCheckpointWriter::Completed& c);

}  // namespace trellis::train
