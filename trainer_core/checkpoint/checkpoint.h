#pragma once
// Checkpoints: <dir>/step-NNNNNNNN/ holds the shard file(s) and manifest.json.
// The shards are written first, the manifest last (temp name, fsync, rename):
// a step counts only when its manifest exists, so a crash mid-save leaves the
// previous checkpoint as the latest.

#include <torch/torch.h>

#include <string>

#include "common/spec/trainer_spec.h"
#include "trainer_core/optim/optim.h"

namespace trellis::train {

inline constexpr int kCheckpointVersion = 1;

// What a checkpoint holds besides tensors.
struct CheckpointMeta {
  int64_t step = 0;              // steps completed
  int64_t rows_consumed = 0;     // data position
  uint64_t corpus_checksum = 0;  // the corpus it was trained on
};

std::string StepDir(const std::string& dir, int64_t step);
// Newest step with a manifest, or -1 when there is none.
int64_t LatestCompleteStep(const std::string& dir);

// Saves `state` (every tensor the trainer needs to continue) and prunes all
// but the newest `keep` complete checkpoints. Throws TrainError.
void SaveCheckpoint(const std::string& dir, const spec::TrainerSpec& spec,
                    const CheckpointMeta& meta, const NamedTensors& state, int keep);

// Verifies the manifest against `spec` (model shape, seq_len, global_batch,
// seed), then copies every tensor into the matching entry of `state`. Throws
// TrainError naming the file and the mismatching field or tensor.
CheckpointMeta LoadCheckpoint(const std::string& dir, int64_t step, const spec::TrainerSpec& spec,
                              const NamedTensors& state);

}  // namespace trellis::train
