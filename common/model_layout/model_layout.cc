#include "common/model_layout/model_layout.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace trellis::train {
namespace {

class BlockBuilder {
 public:
  explicit BlockBuilder(std::string name) { block_.name = std::move(name); }

  void Add(std::string name, std::vector<int64_t> shape, Init init, double std, Optim optim,
           bool decay) {
    ParamInfo p{std::move(name), std::move(shape)};
    p.numel = 1;
    for (int64_t d : p.shape) p.numel *= d;
    p.offset = block_.numel;
    p.init = init;
    p.std = std;
    p.optim = optim;
    p.decay = decay;
    block_.numel += p.numel;
    block_.params.push_back(std::move(p));
  }
  void Matrix(std::string name, std::vector<int64_t> shape, double std, Optim optim) {
    Add(std::move(name), std::move(shape), Init::kNormal, std, optim, true);
  }
  void Norm(std::string name, int64_t dim) {
    Add(std::move(name), {dim}, Init::kOnes, 0, Optim::kAdamW, false);
  }
  BlockLayout Take() { return std::move(block_); }

 private:
  BlockLayout block_;
};

}  // namespace

const ParamInfo& BlockLayout::Find(const std::string& short_name) const {
  for (const auto& p : params)
    if (p.name == short_name) return p;
  std::fprintf(stderr, "BlockLayout %s has no parameter %s\n", name.c_str(), short_name.c_str());
  std::abort();
}

std::vector<BlockLayout> ModelLayout(const spec::ModelSpec& m) {
  const int64_t h = m.hidden, hd = m.hidden / m.heads, e = m.experts, f = m.expert_hidden;
  const double std = m.init_std;
  // Residual-branch outputs are scaled down with depth (GPT-2), so the
  // residual stream's variance does not grow with the number of layers.
  const double out_std = std / std::sqrt(2.0 * m.layers);
  std::vector<BlockLayout> blocks;

  BlockBuilder embed("embed");
  embed.Matrix("weight", {m.vocab, h}, std, Optim::kAdamW);
  blocks.push_back(embed.Take());

  for (int i = 0; i < m.layers; ++i) {
    BlockBuilder b("layers." + std::to_string(i));
    b.Norm("attn_norm", h);
    b.Matrix("wq", {m.heads * hd, h}, std, Optim::kMuon);
    b.Matrix("wk", {m.kv_heads * hd, h}, std, Optim::kMuon);
    b.Matrix("wv", {m.kv_heads * hd, h}, std, Optim::kMuon);
    b.Matrix("wo", {h, m.heads * hd}, out_std, Optim::kMuon);
    b.Norm("ffn_norm", h);
    // The router is small and its rows compete through a softmax: AdamW.
    b.Matrix("router", {e, h}, std, Optim::kAdamW);
    if (m.shared_expert) {
      b.Matrix("shared_gate", {f, h}, std, Optim::kMuon);
      b.Matrix("shared_up", {f, h}, std, Optim::kMuon);
      b.Matrix("shared_down", {h, f}, out_std, Optim::kMuon);
    }
    // Routed experts last: the block's dense part is then a prefix
    // (DenseNumel), sharded over all ranks, and the experts the rest.
    b.Matrix("w_gate", {e, f, h}, std, Optim::kMuon);
    b.Matrix("w_up", {e, f, h}, std, Optim::kMuon);
    b.Matrix("w_down", {e, h, f}, out_std, Optim::kMuon);
    blocks.push_back(b.Take());
  }

  BlockBuilder fin("final");
  fin.Norm("norm", h);
  fin.Matrix("head", {m.vocab, h}, std, Optim::kAdamW);
  blocks.push_back(fin.Take());
  return blocks;
}

int64_t DenseNumel(const BlockLayout& block) {
  for (const auto& p : block.params)
    if (p.name == "w_gate") return p.offset;
  return block.numel;
}

int64_t ActiveParamsPerToken(const spec::ModelSpec& m) {
  const int64_t h = m.hidden, hd = m.hidden / m.heads, f = m.expert_hidden;
  int64_t attn = h * hd * (2 * m.heads + 2 * m.kv_heads);
  int64_t ffn = 3 * h * f * (m.experts_per_token + (m.shared_expert ? 1 : 0));
  return m.layers * (attn + ffn + h * m.experts) + h * m.vocab;
}

}  // namespace trellis::train
