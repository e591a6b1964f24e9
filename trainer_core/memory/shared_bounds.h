#pragma once
// Which ranks take host memory from the same bound at once: the ranks of one
// host share its memory and their job's cgroups, the ranks bound to one
// socket its NUMA node. Each counts them all before making a host copy or an
// arena (memory/host_room.h), which alone would fit where all would not.

#include <vector>

#include "trainer_core/memory/host_room.h"
#include "trainer_core/parallel/comm.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

// This rank's memory bounds, each with the number of `comm`'s ranks that
// have the same one (`ranks`): one all-gather of the bounds' keys (the
// host's name and the bound's) where the world is larger than 1, so every
// rank calls it at the same point.
std::vector<MemoryBound> BoundsSharedByTheRanks(Comm& comm, const torch::Device& device);

}  // namespace trellis::train
