#pragma once
// A tensor's bytes between its memory and a shard file. Host tensors are
// written from and read into their own memory (no staging copy). GPU tensors
// go in pieces through two pinned host buffers, so that the device copy of
// one piece overlaps the file I/O of the other; a checkpoint never holds a
// whole shard in host memory.

#include "trainer_core/checkpoint/shard_file.h"
#include "trainer_core/compat_device_time.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

class TensorIo {
 public:
  TensorIo() = default;
  ~TensorIo();  // waits for copies still in flight
  TensorIo(const TensorIo&) = delete;
  TensorIo& operator=(const TensorIo&) = delete;

  // Appends all of `t`'s bytes (contiguous, row-major) to the writer's
  // current entry.
  void Write(const torch::Tensor& t, ShardWriter& writer);
  // Fills `t` (contiguous, exactly e.bytes) from entry `e` and verifies it.
  void Read(const ShardReader& shard, const ShardEntry& e, const torch::Tensor& t);

 private:
  torch::Tensor Pinned(int i);  // a pinned byte buffer, allocated on first use
  void WaitAll();

  torch::Tensor pinned_[2];
  compat::DeviceStamp copied_[2];  // when the last copy from or to each buffer ends
};

// Bytes of each piece through a pinned buffer.
inline constexpr int64_t kPinnedPieceBytes = 64ll << 20;

}  // namespace trellis::train
