#pragma once
// Cross-section checks of a [model] run: does the trainer's layout fit the
// world the [slurm] section asks for? The same rules the trainer enforces at
// start (trainer_core/parallel/expert_parallel.cc, trainer.cc), checked at
// submit so a bad spec is refused before it queues for hours.

#include <string>

#include "common/spec/field_errors.h"
#include "common/spec/trainer_spec.h"

namespace trellis::spec {

// Empty when training.micro_batch (0: all) divides the rows each rank trains
// per step (global_batch / world, already known to divide evenly); else the
// message for the field, naming both numbers. `world_text` says what the
// world is ("world 2", or how a spec's nodes make it).
std::string MicroBatchMismatch(const TrainingSpec& t, int world, const std::string& world_text);

// Empty when model.expert_groups is 1 or a multiple of the expert-parallel
// size `ep` (each EP rank then holds whole groups, so every rank gets the
// same token-expert load, which is what the groups are for); else the message
// for the field, naming both numbers and what is accepted.
std::string ExpertGroupsMismatch(const ModelSpec& m, int ep);

// world = nodes * ranks_per_node; parallel.node_size defaults to
// ranks_per_node and parallel.ep to node_size, as in the trainer.
void CheckModelFitsWorld(const TrainerSpec& t, int nodes, int ranks_per_node,
                         FieldErrors* errors);

}  // namespace trellis::spec
