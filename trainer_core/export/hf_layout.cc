#include "trainer_core/export/hf_layout.h"

#include <cstdio>
#include <cstdlib>

#include "common/model_layout/model_layout.h"

namespace trellis::train {
namespace {

// Mixtral's (and, for the shared expert, Qwen2-MoE's) name of each of a
// layer block's parameters; experts are named one by one.
const char* HfLayerParamName(const std::string& short_name) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"attn_norm", "input_layernorm.weight"},
      {"wq", "self_attn.q_proj.weight"},
      {"wk", "self_attn.k_proj.weight"},
      {"wv", "self_attn.v_proj.weight"},
      {"wo", "self_attn.o_proj.weight"},
      {"ffn_norm", "post_attention_layernorm.weight"},
      {"router", "block_sparse_moe.gate.weight"},
      {"shared_gate", "block_sparse_moe.shared_expert.gate_proj.weight"},
      {"shared_up", "block_sparse_moe.shared_expert.up_proj.weight"},
      {"shared_down", "block_sparse_moe.shared_expert.down_proj.weight"},
  };
  for (const auto& [mine, theirs] : kNames)
    if (short_name == mine) return theirs;
  return nullptr;
}

// Mixtral's expert matrices: w1 the gate, w3 the up projection, w2 the down.
const char* HfExpertName(const std::string& short_name) {
  if (short_name == "w_gate") return "w1";
  if (short_name == "w_up") return "w3";
  if (short_name == "w_down") return "w2";
  return nullptr;
}

}  // namespace

std::vector<HfTensor> HfTensors(const spec::TrainerSpec& spec) {
  const std::vector<BlockLayout> layout = ModelLayout(spec.model);
  std::vector<HfTensor> out;
  for (size_t b = 0; b < layout.size(); ++b) {
    const BlockLayout& block = layout[b];
    const int bi = static_cast<int>(b);
    if (block.name == "embed") {
      const ParamInfo& p = block.Find("weight");
      out.push_back({"model.embed_tokens.weight", p.shape, bi, false, p.offset, p.numel});
      continue;
    }
    if (block.name == "final") {
      const ParamInfo& norm = block.Find("norm");
      const ParamInfo& head = block.Find("head");
      out.push_back({"model.norm.weight", norm.shape, bi, false, norm.offset, norm.numel});
      out.push_back({"lm_head.weight", head.shape, bi, false, head.offset, head.numel});
      continue;
    }
    const std::string prefix = "model." + block.name + ".";  // block.name: "layers.<i>"
    for (const ParamInfo& p : block.params) {
      if (const char* name = HfLayerParamName(p.name)) {
        out.push_back({prefix + name, p.shape, bi, false, p.offset, p.numel});
        if (p.name == "router" && spec.training.router_bias_rate > 0)
          out.push_back({prefix + "block_sparse_moe.gate.e_score_correction_bias",
                         {spec.model.experts}, bi, true, 0, spec.model.experts});
        continue;
      }
      const char* expert = HfExpertName(p.name);
      if (expert == nullptr) {
        std::fprintf(stderr, "HfTensors: no exported name for %s\n", p.name.c_str());
        std::abort();  // a new parameter in model_layout needs its name here
      }
      const int64_t per_expert = p.numel / p.shape[0];
      for (int64_t j = 0; j < p.shape[0]; ++j)
        out.push_back({prefix + "block_sparse_moe.experts." + std::to_string(j) + "." + expert +
                           ".weight",
                       {p.shape[1], p.shape[2]}, bi, false, p.offset + j * per_expert,
                       per_expert});
    }
  }
  return out;
}

std::vector<std::string> HfExtensions(const spec::TrainerSpec& spec) {
  std::vector<std::string> out;
  if (spec.model.shared_expert) out.push_back("shared_expert");
  if (spec.training.router_bias_rate > 0) out.push_back("router_bias");
  if (spec.model.expert_groups > 1) out.push_back("expert_groups");
  return out;
}

std::vector<size_t> HfFileStarts(const std::vector<HfTensor>& tensors, int64_t element_bytes,
                                 int64_t max_file_bytes) {
  std::vector<size_t> starts;
  int64_t in_file = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t bytes = tensors[i].numel * element_bytes;
    if (starts.empty() || (in_file > 0 && in_file + bytes > max_file_bytes)) {
      starts.push_back(i);
      in_file = 0;
    }
    in_file += bytes;
  }
  return starts;
}

std::string HfFileName(size_t file, size_t files) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", file + 1, files);
  return name;
}

nlohmann::ordered_json HfConfig(const spec::TrainerSpec& spec, const std::string& torch_dtype,
                                const std::string& source) {
  const spec::ModelSpec& m = spec.model;
  nlohmann::ordered_json c{
      {"architectures", {"MixtralForCausalLM"}},
      {"model_type", "mixtral"},
      {"vocab_size", m.vocab},
      {"hidden_size", m.hidden},
      {"intermediate_size", m.expert_hidden},
      {"num_hidden_layers", m.layers},
      {"num_attention_heads", m.heads},
      {"num_key_value_heads", m.kv_heads},
      {"head_dim", m.hidden / m.heads},
      {"hidden_act", "silu"},
      // The longest sequence it was trained on; RoPE itself is not limited.
      {"max_position_embeddings", spec.training.seq_len},
      {"rms_norm_eps", m.norm_eps},
      {"rope_theta", m.rope_theta},
      {"num_local_experts", m.experts},
      {"num_experts_per_tok", m.experts_per_token},
      {"router_aux_loss_coef", spec.training.aux_loss_coef},
      {"output_router_logits", false},
      {"sliding_window", nullptr},
      {"attention_dropout", 0.0},
      {"tie_word_embeddings", false},
      {"initializer_range", m.init_std},
      {"use_cache", true},
      {"torch_dtype", torch_dtype}};
  const std::vector<std::string> extensions = HfExtensions(spec);
  if (!extensions.empty()) {
    c["trellis_extensions"] = extensions;
    if (m.shared_expert) c["shared_expert_intermediate_size"] = m.expert_hidden;
    // Each token takes experts_per_token / groups experts from every group of
    // consecutive experts (not DeepSeek-V3's choice of groups first).
    if (m.expert_groups > 1) c["trellis_expert_groups"] = m.expert_groups;
  }
  c["trellis_source"] = source;
  return c;
}

}  // namespace trellis::train
