#include "trainer_core/model/model.h"

#include "trainer_core/model/fusions.h"
#include "trainer_core/model/init.h"
#include "trainer_core/model/loss.h"

namespace trellis::train {
namespace {

// Values of a block computed on the host from the counter-based generator,
// then moved to the device once.
torch::Tensor InitBlock(const BlockLayout& block, uint64_t seed, torch::Dtype dtype) {
  auto buf = torch::empty({block.numel}, torch::TensorOptions().dtype(dtype));
  for (const auto& p : block.params) {
    auto slice = buf.narrow(0, p.offset, p.numel);
    if (p.init == Init::kOnes) {
      slice.fill_(1.0);
      continue;
    }
    uint64_t param_seed = ParamSeed(seed, block.FullName(p));
    if (dtype == torch::kDouble)
      FillTruncatedNormal(param_seed, 0, p.numel, p.std, slice.data_ptr<double>());
    else
      FillTruncatedNormal(param_seed, 0, p.numel, p.std, slice.data_ptr<float>());
  }
  return buf;
}

// One block's weights, viewed out of its buffer in the compute dtype. The
// buffer is split into its parameters at once: the split's backward writes
// the block's gradient in one pass, where a narrow per parameter would fill a
// block-sized buffer with zeros per parameter and add them all up.
class Weights {
 public:
  Weights(const BlockLayout* layout, const torch::Tensor& flat, torch::Dtype dtype)
      : layout_(layout), flat_(flat.scalar_type() == dtype ? flat : flat.to(dtype)) {
    std::vector<int64_t> sizes;
    int64_t at = 0;
    for (const auto& p : layout->params) {  // in offset order, up to what the buffer holds
      if (p.offset != at || at + p.numel > flat_.numel()) break;
      sizes.push_back(p.numel);
      at += p.numel;
    }
    split_ = static_cast<int64_t>(sizes.size());
    if (at < flat_.numel()) sizes.push_back(flat_.numel() - at);  // padding, or the rest
    pieces_ = flat_.split_with_sizes(sizes);
  }
  torch::Tensor operator[](const std::string& name) const {
    for (int64_t i = 0; i < split_; ++i)
      if (layout_->params[i].name == name) return pieces_[i].view(layout_->params[i].shape);
    return ParamView(flat_, layout_->Find(name));
  }
  bool Has(const std::string& name) const {
    for (const auto& p : layout_->params)
      if (p.name == name) return true;
    return false;
  }

 private:
  const BlockLayout* layout_;
  torch::Tensor flat_;
  std::vector<torch::Tensor> pieces_;
  int64_t split_ = 0;  // parameters [0, split_) are pieces_[i]
};

}  // namespace

torch::Tensor ParamView(const torch::Tensor& flat, const ParamInfo& p) {
  return flat.narrow(0, p.offset, p.numel).view(p.shape);
}

Model::Model(const spec::ModelSpec& spec, int64_t max_seq_len, uint64_t seed, torch::Device device,
             torch::Dtype param_dtype)
    : spec_(spec), device_(device), layout_(ModelLayout(spec)) {
  for (const auto& block : layout_) {
    auto flat = InitBlock(block, seed, param_dtype).to(device).requires_grad_(true);
    flat.mutable_grad() = torch::zeros_like(flat);
    blocks_.push_back({&block, flat});
  }
  for (int i = 0; i < spec.layers; ++i)
    router_bias_.push_back(torch::zeros({spec.experts}, torch::TensorOptions(device)));
  rope_ = BuildRope(max_seq_len, spec.hidden / spec.heads, spec.rope_theta, device, param_dtype);
}

int64_t Model::NumParams() const {
  int64_t n = 0;
  for (const auto& b : blocks_) n += b.layout->numel;
  return n;
}

torch::Tensor EmbedForward(const BlockLayout& block, const torch::Tensor& flat,
                           const torch::Tensor& inputs, torch::Dtype compute_dtype) {
  return torch::embedding(Weights(&block, flat, compute_dtype)["weight"], inputs);
}

LayerOutput LayerForward(const spec::ModelSpec& spec, const BlockLayout& block,
                         const torch::Tensor& flat, torch::Dtype compute_dtype,
                         const torch::Tensor& x, const torch::Tensor& pending,
                         const RopeCache& rope, const torch::Tensor& mask,
                         const torch::Tensor& router_bias, const MoeWeights& moe_reduce) {
  const int64_t b = x.size(0), t = x.size(1), h = spec.hidden;
  const double eps = spec.norm_eps;
  Weights w(&block, flat, compute_dtype);
  AttentionWeights attn{w["wq"], w["wk"], w["wv"], w["wo"], spec.heads, spec.kv_heads};
  // Each residual add and the norm after it are one pass (rms_norm.h).
  ResidualNorm in = pending.defined() ? AddRmsNorm(x, pending, w["attn_norm"], eps)
                                      : ResidualNorm{x, RmsNorm(x, w["attn_norm"], eps)};
  auto [y, normed] =
      AddRmsNorm(in.y, AttentionForward(in.normed, attn, rope, mask), w["ffn_norm"], eps);

  MoeWeights moe = moe_reduce;
  moe.router = w["router"];
  moe.router_bias = router_bias;
  if (!moe.run_experts) {
    moe.experts.gate = w["w_gate"];
    moe.experts.up = w["w_up"];
    moe.experts.down = w["w_down"];
  }
  if (w.Has("shared_gate")) {
    moe.shared_gate = w["shared_gate"];
    moe.shared_up = w["shared_up"];
    moe.shared_down = w["shared_down"];
  }
  moe.top_k = spec.experts_per_token;
  moe.groups = spec.expert_groups;
  MoeResult r = MoeForward(normed.view({b * t, h}), moe);
  auto moe_out = r.y.view({b, t, h});
  if (!ActiveFusions().cross_layer_norm) return {y + moe_out, {}, r.aux, r.counts};
  return {y, moe_out, r.aux, r.counts};
}

torch::Tensor HeadCrossEntropySum(const spec::ModelSpec& spec, const BlockLayout& block,
                                  const torch::Tensor& flat, torch::Dtype compute_dtype,
                                  const torch::Tensor& x, const torch::Tensor& targets,
                                  bool chunked) {
  Weights fin(&block, flat, compute_dtype);
  auto normed = RmsNorm(x, fin["norm"], spec.norm_eps).reshape({-1, spec.hidden});
  auto flat_targets = targets.reshape({-1});
  if (chunked)
    return LinearCrossEntropySum(normed, fin["head"], flat_targets,
                                 CrossEntropyChunkRows(spec.vocab));
  auto acc = compute_dtype == torch::kDouble ? torch::kDouble : torch::kFloat;
  return torch::cross_entropy_loss(torch::matmul(normed, fin["head"].t()).to(acc), flat_targets,
                                   /*weight=*/{}, at::Reduction::Sum, /*ignore_index=*/-1);
}

torch::Tensor HeadCrossEntropySum(const spec::ModelSpec& spec, const BlockLayout& block,
                                  const torch::Tensor& flat, torch::Dtype compute_dtype,
                                  const torch::Tensor& x, const torch::Tensor& targets) {
  return HeadCrossEntropySum(spec, block, flat, compute_dtype, x, targets,
                             ActiveFusions().chunked_ce);
}

ForwardResult Model::Forward(const TokenBatch& batch, torch::Dtype compute_dtype,
                             double aux_coef) const {
  return Forward(batch, compute_dtype, aux_coef, ActiveFusions());
}

ForwardResult Model::Forward(const TokenBatch& batch, torch::Dtype compute_dtype, double aux_coef,
                             const Fusions& fusions) const {
  auto mask = DocumentCausalMask(batch.doc_ids);
  auto x = EmbedForward(*blocks_.front().layout, blocks_.front().flat, batch.inputs, compute_dtype);

  ForwardResult out;
  std::vector<torch::Tensor> aux;
  torch::Tensor pending;
  for (int i = 0; i < spec_.layers; ++i) {
    const Block& blk = blocks_[i + 1];
    LayerOutput r = LayerForward(spec_, *blk.layout, blk.flat, compute_dtype, x, pending, rope_,
                                 mask, router_bias_[i], MoeWeights{});
    x = r.x;
    pending = r.pending;
    aux.push_back(r.aux);
    out.expert_counts.push_back(r.counts);
  }
  if (pending.defined()) x = x + pending;

  const Block& head = blocks_.back();
  auto ce_sum = HeadCrossEntropySum(spec_, *head.layout, head.flat, compute_dtype, x, batch.targets,
                                    fusions.chunked_ce);
  // cross_entropy's mean over positions with a target, except that a batch
  // without any gives 0 (and zero gradients) rather than 0/0.
  out.ce = ce_sum / batch.targets.ne(-1).sum().clamp_min(1);
  out.aux = torch::stack(aux).mean();
  out.loss = aux_coef > 0 ? out.ce + aux_coef * out.aux : out.ce;
  return out;
}

void Model::ZeroGrad() {
  for (auto& b : blocks_) b.flat.mutable_grad().zero_();
}

void Model::UpdateRouterBias(const std::vector<torch::Tensor>& counts, double rate) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < counts.size(); ++i) {
    auto load = counts[i].to(torch::kFloat);
    router_bias_[i] += rate * torch::sign(load.mean() - load);
  }
}

}  // namespace trellis::train
