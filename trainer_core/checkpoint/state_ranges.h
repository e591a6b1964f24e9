#pragma once
// Which logical elements of each tensor in a checkpoint a rank of a mesh
// holds (the trainer's sharding, for resharding on resume): dense state is
// flat-sharded (padded to a multiple of the world), expert state is owned on
// expert boundaries, the rest is whole on every rank.

#include "common/spec/trainer_spec.h"
#include "trainer_core/checkpoint/checkpoint.h"

namespace trellis::train {

RangesFn StateRanges(const spec::ModelSpec& model);

}  // namespace trellis::train
