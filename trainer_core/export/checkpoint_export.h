#pragma once
// A checkpoint's weights as a Hugging Face-style model directory: the sharded
// checkpoint of any mesh gathered block by block (the resharding of a resume,
// to world 1: checkpoint.h) and written as safetensors files under Mixtral's
// or Qwen2-MoE's names (hf_layout.h), with model.safetensors.index.json and
// config.json.
// One block's weights are in memory at a time. The directory appears whole or
// not at all: written beside it under a temporary name, then renamed.

#include <cstdint>
#include <string>
#include <vector>

#include "common/spec/trainer_spec.h"

namespace trellis::train {

struct ExportOptions {
  std::string checkpoint_dir;  // holds step-NNNNNNNN/
  int64_t step = -1;           // a complete step of it
  std::string out_dir;         // absent or empty
  std::string dtype = "float32";                  // or "bfloat16" (rounded to nearest even)
  int64_t max_file_bytes = int64_t{5} << 30;      // per safetensors file, as Hugging Face's
  std::string source;                             // for config.json, e.g. "run 7 step 40"
};

struct ExportSummary {
  std::vector<std::string> files;  // the safetensors files, in order
  int64_t tensors = 0;
  int64_t bytes = 0;  // of the tensors' data
  std::string layout;                   // hf_layout.h's HfLayoutName: "mixtral", "qwen2_moe"
  std::vector<std::string> extensions;  // hf_layout.h's HfExtensions
};

// Throws TrainError naming what is wrong: the step, the spec's model against
// the checkpoint's, a damaged shard, an out_dir that holds files.
ExportSummary ExportCheckpoint(const spec::TrainerSpec& spec, const ExportOptions& options);

}  // namespace trellis::train
