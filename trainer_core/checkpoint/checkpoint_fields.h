#pragma once
// What a checkpoint's save writes and its resume checks alike: the spec's
// fields a checkpoint must agree with to be resumed (the manifest's "spec"),
// and a tensor's dtype as the shards store it. checkpoint.cc defines them.

#include <nlohmann/json.hpp>

#include "common/spec/trainer_spec.h"
#include "trainer_core/checkpoint/shard_file.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

nlohmann::json SpecIdentity(const spec::TrainerSpec& s);

// Throws TrainError for a dtype checkpoints do not store.
DType ToDType(torch::ScalarType t);

}  // namespace trellis::train
