// The RoPE tables, the document mask and grouped-query attention.
#include "trainer_core/compat.h"
#include "trainer_core/model/fusions.h"
#include "trainer_core/model/layers.h"
#include "trainer_core/model/rope.h"

namespace trellis::train {

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

torch::Tensor AttentionForward(const torch::Tensor& x, const AttentionWeights& w,
                               const RopeCache& rope, const torch::Tensor& mask,
                               const Fusions& fusions) {
  const int64_t b = x.size(0), t = x.size(1), hd = w.wq.size(0) / w.heads;
  auto heads = [&](const torch::Tensor& wt, int64_t n) {  // [b, t, n, hd]
    return torch::matmul(x, wt.t()).view({b, t, n, hd});
  };
  // RoPE before the transpose to [b, n, t, hd]: on the token-major layout its
  // passes (and their gradients) run vectorized.
  auto q = Rope(heads(w.wq, w.heads), rope).transpose(1, 2);
  auto k = Rope(heads(w.wk, w.kv_heads), rope).transpose(1, 2);
  auto v = heads(w.wv, w.kv_heads).transpose(1, 2);
  // Inside the op only for plain causal attention, where flash and cuDNN take
  // grouped heads (measured); with a document mask the memory-efficient kernel
  // runs, and where it does not take them the op would fall back to the math
  // path, which builds [T, T] scores.
  const bool gqa = w.kv_heads != w.heads && !mask.defined() && fusions.sdpa_gqa &&
                   compat::kAttentionGqa;
  if (w.kv_heads != w.heads && !gqa) {
    k = k.repeat_interleave(w.heads / w.kv_heads, 1);
    v = v.repeat_interleave(w.heads / w.kv_heads, 1);
  }
  auto o = compat::Attention(q, k, v, mask, gqa);
  return torch::matmul(o.transpose(1, 2).reshape({b, t, w.heads * hd}), w.wo.t());
}

}  // namespace trellis::train
