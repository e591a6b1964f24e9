#pragma once
// A checkpoint's weights under the names and shapes of Hugging Face's Mixtral
// (MixtralForCausalLM): the layout of the open MoE models whose block is this
// trainer's (pre-norm RMSNorm, grouped-query attention with rotate-half RoPE,
// softmax top-k routing with the gates renormalized over the k, SwiGLU
// experts, untied head), so its loaders and tools take the export as it is.
// Every exported tensor is a contiguous slice of one block's flat buffer
// (common/model_layout): an expert's matrix is row j of the stacked [E, out,
// in] one. Linear weights are [out, in] in both, so nothing is transposed.
//
// What Mixtral has no place for goes under the names of the models that have
// it, and config.json lists it under "trellis_extensions" (a stock Mixtral
// loader leaves it out, so its outputs differ from the trained model's):
// the shared expert as Qwen2-MoE's "mlp.shared_expert.*" (without its
// sigmoid gate), the balancing bias as DeepSeek-V3's
// "gate.e_score_correction_bias" (added to the probabilities to choose the
// experts, not to the gates), group-limited routing as DeepSeek-V3's
// n_group/topk_group. Torch-free.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/spec/trainer_spec.h"

namespace trellis::train {

struct HfTensor {
  std::string name;            // e.g. "model.layers.0.block_sparse_moe.experts.3.w1.weight"
  std::vector<int64_t> shape;
  int block = 0;               // index into ModelLayout(model)
  bool router_bias = false;    // the layer's balancing bias, not a slice of the block
  int64_t offset = 0, numel = 0;  // in the block's flat buffer (elements)
};

// Every tensor of the export, block by block in the model's order.
std::vector<HfTensor> HfTensors(const spec::TrainerSpec& spec);

// What a stock Mixtral loader would leave out of this model ("shared_expert",
// "router_bias", "expert_groups"); empty when it takes the model whole.
std::vector<std::string> HfExtensions(const spec::TrainerSpec& spec);

// The files of the export: consecutive runs of tensors of at most
// `max_file_bytes` each (a tensor larger than that gets a file of its own).
// Returns the index of each file's first tensor.
std::vector<size_t> HfFileStarts(const std::vector<HfTensor>& tensors, int64_t element_bytes,
                                 int64_t max_file_bytes);
// "model-00002-of-00005.safetensors".
std::string HfFileName(size_t file, size_t files);

// config.json: Mixtral's keys (transformers' MixtralConfig), the extensions,
// and where the weights came from (`source`, e.g. "run 7 step 40").
nlohmann::ordered_json HfConfig(const spec::TrainerSpec& spec, const std::string& torch_dtype,
                                const std::string& source);

}  // namespace trellis::train
