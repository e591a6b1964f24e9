#include "trainer_core/export/hf_layout.h"

#include <cstdio>
#include <cstdlib>

#include "common/model_layout/model_layout.h"

namespace trellis::train {
namespace {

using Source = HfTensor::Source;

// The layout's name of each of a layer block's parameters, after
// "model.layers.<i>."; experts are named one by one (HfExpertName).
const char* HfLayerParamName(HfLayout layout, const std::string& short_name) {
  static const std::pair<const char*, const char*> kAttention[] = {
      {"attn_norm", "input_layernorm.weight"},    {"wq", "self_attn.q_proj.weight"},
      {"wk", "self_attn.k_proj.weight"},          {"wv", "self_attn.v_proj.weight"},
      {"wo", "self_attn.o_proj.weight"},          {"ffn_norm", "post_attention_layernorm.weight"},
  };
  static const std::pair<const char*, const char*> kMixtral[] = {
      {"router", "block_sparse_moe.gate.weight"}};
  static const std::pair<const char*, const char*> kQwen2Moe[] = {
      {"router", "mlp.gate.weight"},
      {"shared_gate", "mlp.shared_expert.gate_proj.weight"},
      {"shared_up", "mlp.shared_expert.up_proj.weight"},
      {"shared_down", "mlp.shared_expert.down_proj.weight"},
  };
  for (const auto& [mine, theirs] : kAttention)
    if (short_name == mine) return theirs;
  if (layout == HfLayout::kMixtral) {
    for (const auto& [mine, theirs] : kMixtral)
      if (short_name == mine) return theirs;
  } else {
    for (const auto& [mine, theirs] : kQwen2Moe)
      if (short_name == mine) return theirs;
  }
  return nullptr;
}

// Mixtral's expert matrices: w1 the gate, w3 the up projection, w2 the down.
std::string HfExpertName(HfLayout layout, const std::string& short_name, int64_t expert) {
  const bool mixtral = layout == HfLayout::kMixtral;
  const char* name = short_name == "w_gate" ? (mixtral ? "w1" : "gate_proj")
                     : short_name == "w_up" ? (mixtral ? "w3" : "up_proj")
                     : short_name == "w_down" ? (mixtral ? "w2" : "down_proj")
                                              : nullptr;
  if (name == nullptr) {
    std::fprintf(stderr, "HfTensors: no exported name for %s\n", short_name.c_str());
    std::abort();  // a new parameter in model_layout needs its name here
  }
  return std::string(mixtral ? "block_sparse_moe" : "mlp") + ".experts." +
         std::to_string(expert) + "." + name + ".weight";
}

std::string MoePrefix(HfLayout layout) {
  return layout == HfLayout::kMixtral ? "block_sparse_moe." : "mlp.";
}

}  // namespace

HfLayout HfLayoutFor(const spec::ModelSpec& model) {
  return model.shared_expert ? HfLayout::kQwen2Moe : HfLayout::kMixtral;
}

const char* HfLayoutName(HfLayout layout) {
  return layout == HfLayout::kMixtral ? "mixtral" : "qwen2_moe";
}

std::vector<HfTensor> HfTensors(const spec::TrainerSpec& spec) {
  const HfLayout hf = HfLayoutFor(spec.model);
  const std::vector<BlockLayout> layout = ModelLayout(spec.model);
  std::vector<HfTensor> out;
  auto slice = [&](std::string name, const ParamInfo& p, int block) {
    out.push_back({std::move(name), p.shape, block, Source::kSlice, p.offset, p.numel});
  };
  for (size_t b = 0; b < layout.size(); ++b) {
    const BlockLayout& block = layout[b];
    const int bi = static_cast<int>(b);
    if (block.name == "embed") {
      slice("model.embed_tokens.weight", block.Find("weight"), bi);
      continue;
    }
    if (block.name == "final") {
      slice("model.norm.weight", block.Find("norm"), bi);
      slice("lm_head.weight", block.Find("head"), bi);
      continue;
    }
    const std::string prefix = "model." + block.name + ".";  // block.name: "layers.<i>"
    for (const ParamInfo& p : block.params) {
      const char* name = HfLayerParamName(hf, p.name);
      if (name == nullptr) {
        const int64_t per_expert = p.numel / p.shape[0];
        for (int64_t j = 0; j < p.shape[0]; ++j)
          out.push_back({prefix + HfExpertName(hf, p.name, j), {p.shape[1], p.shape[2]}, bi,
                         Source::kSlice, p.offset + j * per_expert, per_expert});
        continue;
      }
      slice(prefix + name, p, bi);
      const bool qwen = hf == HfLayout::kQwen2Moe;
      if (qwen && (p.name == "wq" || p.name == "wk" || p.name == "wv")) {
        std::string bias = prefix + name;
        bias.replace(bias.size() - 6, 6, "bias");  // "weight" -> "bias"
        out.push_back({bias, {p.shape[0]}, bi, Source::kZeros, 0, p.shape[0]});
      }
      if (p.name == "shared_down") {
        out.back().scale = 2;  // times Qwen2-MoE's gate, sigmoid(0) = 1/2
        out.push_back({prefix + "mlp.shared_expert_gate.weight", {1, spec.model.hidden}, bi,
                       Source::kZeros, 0, spec.model.hidden});
      }
      if (p.name == "router" && spec.training.router_bias_rate > 0)
        out.push_back({prefix + MoePrefix(hf) + "gate.e_score_correction_bias",
                       {spec.model.experts}, bi, Source::kRouterBias, 0, spec.model.experts});
    }
  }
  return out;
}

std::vector<std::string> HfExtensions(const spec::TrainerSpec& spec) {
  std::vector<std::string> out;
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
  const bool mixtral = HfLayoutFor(m) == HfLayout::kMixtral;
  nlohmann::ordered_json c{
      {"architectures", {mixtral ? "MixtralForCausalLM" : "Qwen2MoeForCausalLM"}},
      {"model_type", HfLayoutName(HfLayoutFor(m))},
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
      {"num_experts_per_tok", m.experts_per_token},
      {"router_aux_loss_coef", spec.training.aux_loss_coef},
      {"output_router_logits", false},
      {"sliding_window", nullptr},
      {"attention_dropout", 0.0},
      {"tie_word_embeddings", false},
      {"initializer_range", m.init_std},
      {"use_cache", true},
      {"torch_dtype", torch_dtype}};
  if (mixtral) {
    c["num_local_experts"] = m.experts;
  } else {
    c["num_experts"] = m.experts;
    c["moe_intermediate_size"] = m.expert_hidden;
    c["shared_expert_intermediate_size"] = m.expert_hidden;
    c["norm_topk_prob"] = true;
    c["decoder_sparse_step"] = 1;  // every layer is an MoE layer
    c["mlp_only_layers"] = nlohmann::ordered_json::array();
    c["use_sliding_window"] = false;
    c["max_window_layers"] = m.layers;
  }
  const std::vector<std::string> extensions = HfExtensions(spec);
  if (!extensions.empty()) {
    c["trellis_extensions"] = extensions;
    // Each token takes experts_per_token / groups experts from every group of
    // consecutive experts (not DeepSeek-V3's choice of groups first).
    if (m.expert_groups > 1) c["trellis_expert_groups"] = m.expert_groups;
  }
  c["trellis_source"] = source;
  return c;
}

}  // namespace trellis::train
