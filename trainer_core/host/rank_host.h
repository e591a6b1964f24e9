#pragma once
// trainer_core hosted in a rank process (`trellis-worker rank` in [model]
// mode): everything but spec loading, so the worker's rank entry point only
// wires. Torch-free header and translation unit.

#include "common/spec/trainer_spec.h"

namespace trellis::train {

// Trains this rank: Comm from RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
// (world 1 without them), parallel.node_size defaulting to LOCAL_WORLD_SIZE,
// checkpoints in TRELLIS_CHECKPOINT_DIR, resume from TRELLIS_RESUME_STEP
// ("latest" or a step; empty or -1: fresh), and one JSON step record per line to
// the unix socket TRELLIS_STEP_SOCKET (when set), the corpus only from under
// the data roots in TRELLIS_DATA_ROOTS (one per line; unset: any). If the
// socket goes away training continues without records (the worker's hang
// timeout decides). Returns the exit code: 0 done, kExitDoNotRetry (79) for
// a corpus outside the data roots, 1 other bad input or training error (the
// message goes to stderr, naming the file or field).
int RunHostedRank(const spec::TrainerSpec& spec);

}  // namespace trellis::train
