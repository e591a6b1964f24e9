// RMSNorm, RoPE, the document mask and grouped-query attention.
#include "trainer_core/compat.h"
#include "trainer_core/model/layers.h"

namespace trellis::train {

torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  if (auto fused = compat::FusedRmsNorm(x, weight, eps)) return *fused;
  // Statistics in at least fp32 even when activations are bf16.
  auto acc = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  auto xf = x.to(acc);
  auto normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return normed.to(x.scalar_type()) * weight;
}

RopeCache BuildRope(int64_t max_len, int64_t head_dim, double theta, torch::Device device,
                    torch::Dtype dtype) {
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  auto inv_freq =
      torch::pow(theta, -torch::arange(0, head_dim, 2, opts) / static_cast<double>(head_dim));
  auto angles = torch::outer(torch::arange(max_len, opts), inv_freq);
  return {angles.cos().to(device, dtype), angles.sin().to(device, dtype)};
}

torch::Tensor DocumentCausalMask(const torch::Tensor& doc_ids) {
  if (!doc_ids.defined()) return {};
  const int64_t t = doc_ids.size(1);
  auto same_doc = doc_ids.unsqueeze(2) == doc_ids.unsqueeze(1);
  auto causal = torch::ones({t, t}, doc_ids.options().dtype(torch::kBool)).tril();
  return (same_doc & causal).unsqueeze(1);
}

namespace {

// Rotates the two halves of each head's features by the position's angle.
// x is [b, t, heads, head_dim] as the projection wrote it, before the
// transpose to [b, heads, t, head_dim]: on the contiguous layout the
// elementwise kernels (and their gradients) run vectorized, where on the
// transposed view they took the strided path.
torch::Tensor ApplyRope(const torch::Tensor& x, const RopeCache& rope) {
  const int64_t t = x.size(1), half = x.size(3) / 2;
  auto cos = rope.cos.narrow(0, 0, t).to(x.scalar_type()).unsqueeze(1);  // [t, 1, half]
  auto sin = rope.sin.narrow(0, 0, t).to(x.scalar_type()).unsqueeze(1);
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

}  // namespace

torch::Tensor AttentionForward(const torch::Tensor& x, const AttentionWeights& w,
                               const RopeCache& rope, const torch::Tensor& mask) {
  const int64_t b = x.size(0), t = x.size(1), hd = w.wq.size(0) / w.heads;
  auto heads = [&](const torch::Tensor& wt, int64_t n) {  // [b, t, n, hd]
    return torch::matmul(x, wt.t()).view({b, t, n, hd});
  };
  auto q = ApplyRope(heads(w.wq, w.heads), rope).transpose(1, 2);
  auto k = ApplyRope(heads(w.wk, w.kv_heads), rope).transpose(1, 2);
  auto v = heads(w.wv, w.kv_heads).transpose(1, 2);
  if (w.kv_heads != w.heads) {
    k = k.repeat_interleave(w.heads / w.kv_heads, 1);
    v = v.repeat_interleave(w.heads / w.kv_heads, 1);
  }
  auto o = compat::Attention(q, k, v, mask);
  return torch::matmul(o.transpose(1, 2).reshape({b, t, w.heads * hd}), w.wo.t());
}

}  // namespace trellis::train
