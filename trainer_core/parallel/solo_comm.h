#pragma once
// A communicator of one rank: every collective is a copy, done when started,
// and not timed. What ConnectComm gives at world 1 and Subgroup for a group of
// one.

#include <memory>

#include "trainer_core/parallel/comm.h"

namespace trellis::train {

// `cuda`: what the rank's Comm::cuda() says (where its tensors live).
std::unique_ptr<Comm> MakeSoloComm(bool cuda);

// A collective with nothing to wait for (nothing travels).
std::unique_ptr<CommWork> FinishedWork();

}  // namespace trellis::train
