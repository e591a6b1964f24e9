#pragma once
// A checkpoint's weights under the names and shapes of a Hugging Face MoE
// model whose block is this trainer's (pre-norm RMSNorm, grouped-query
// attention with rotate-half RoPE, softmax top-k routing with the gates
// renormalized over the k, SwiGLU experts, untied head), so that its loaders
// (transformers, vLLM, the safetensors tools) take the export as it is:
//   - Mixtral (MixtralForCausalLM) for a model without a shared expert: the
//     open MoE layout of exactly this block;
//   - Qwen2-MoE (Qwen2MoeForCausalLM) for a model with one: Mixtral has no
//     place for it. Qwen2-MoE's attention has q/k/v biases and its shared
//     expert a sigmoid gate; the export writes the biases as zeros, the
//     gate's weight as zeros (sigmoid 0 = 1/2) and the shared expert's down
//     projection doubled, exactly (a power of two), so its output is this
//     model's.
// Most tensors are contiguous slices of one block's flat buffer
// (common/model_layout): an expert's matrix is row j of the stacked [E, out,
// in] one. Linear weights are [out, in] in both, so nothing is transposed.
//
// What neither has a place for goes under DeepSeek-V3's names and config.json
// lists it under "trellis_extensions" (a stock loader leaves it out, so its
// outputs differ from the trained model's): the balancing bias as
// "gate.e_score_correction_bias" (added to the probabilities to choose the
// experts, not to the gates), group-limited routing as
// "trellis_expert_groups". Torch-free.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/spec/trainer_spec.h"

namespace trellis::train {

enum class HfLayout { kMixtral, kQwen2Moe };
HfLayout HfLayoutFor(const spec::ModelSpec& model);
const char* HfLayoutName(HfLayout layout);  // "mixtral", "qwen2_moe"

struct HfTensor {
  enum class Source { kSlice, kRouterBias, kZeros };
  std::string name;  // e.g. "model.layers.0.block_sparse_moe.experts.3.w1.weight"
  std::vector<int64_t> shape;
  int block = 0;  // index into ModelLayout(model)
  Source source = Source::kSlice;  // a slice of the block, its layer's bias, or zeros
  int64_t offset = 0, numel = 0;   // in the block's flat buffer (elements)
  float scale = 1;                 // a power of two the slice is multiplied by
};

// Every tensor of the export, block by block in the model's order.
std::vector<HfTensor> HfTensors(const spec::TrainerSpec& spec);

// What a stock loader would leave out of this model ("router_bias",
// "expert_groups"); empty when it takes the model whole.
std::vector<std::string> HfExtensions(const spec::TrainerSpec& spec);

// The files of the export: consecutive runs of tensors of at most
// `max_file_bytes` each (a tensor larger than that gets a file of its own).
// Returns the index of each file's first tensor.
std::vector<size_t> HfFileStarts(const std::vector<HfTensor>& tensors, int64_t element_bytes,
                                 int64_t max_file_bytes);
// "model-00002-of-00005.safetensors".
std::string HfFileName(size_t file, size_t files);

// config.json: the layout's keys (transformers' MixtralConfig or
// Qwen2MoeConfig), the extensions, and where the weights came from
// (`source`, e.g. "run 7 step 40").
nlohmann::ordered_json HfConfig(const spec::TrainerSpec& spec, const std::string& torch_dtype,
                                const std::string& source);

}  // namespace trellis::train
