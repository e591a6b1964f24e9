#pragma once
// How checkpoint.async's device-to-host copy of a rank's state is cut up.
// A GPU's copy engine serves one copy at a time, in the order queued: a
// shard of several GiB queued whole holds every other device-to-host copy
// of the process (the step's reads of its loss and gradient norm) for the
// ~0.1-0.2 s it takes. Queued a batch of at most a few tens of MiB at a time
// (async_save.h), another copy waits for one batch at most. Pure, so it is
// tested without a device.

#include <cstdint>
#include <vector>

namespace trellis::train {

// Elements [first, first + count) of one tensor of the state, counted in the
// tensor's order of memory; a tensor that cannot be cut (not contiguous) is
// one piece of all its elements.
struct CopyPiece {
  int tensor = 0;
  int64_t first = 0, count = 0;
};

struct CopiedTensor {
  int64_t elements = 0;
  int64_t element_bytes = 1;
  bool contiguous = true;
};

// The pieces of `tensors`, in order, grouped into batches of at most
// `batch_bytes` (a tensor longer than that is cut into several batches;
// consecutive small ones share one); tensors without elements are left out.
// A non-contiguous tensor longer than `batch_bytes` is a batch of its own.
std::vector<std::vector<CopyPiece>> CopyBatches(const std::vector<CopiedTensor>& tensors,
                                                int64_t batch_bytes);

}  // namespace trellis::train
