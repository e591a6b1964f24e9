// The RoPE tables, the document mask and grouped-query attention.
#include "trainer_core/compat.h"
#include "trainer_core/model/fusions.h"
#include "trainer_core/model/layers.h"
#include "trainer_core/model/rope_op.h"

namespace trellis::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// q, k and v of one input, x [rows, h] times each weight [out, h] transposed.
// Backward sums the three input gradients in the GEMMs themselves (addmm,
// beta 1: one rounding where autograd rounds each product and then each of
// two adds, each add a pass over [rows, h]).
class ProjectQkvFn : public torch::autograd::Function<ProjectQkvFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& wq, const torch::Tensor& wk,
                               const torch::Tensor& wv) {
    ctx->save_for_backward({x, wq, wk, wv});
    return {torch::mm(x, wq.t()), torch::mm(x, wk.t()), torch::mm(x, wv.t())};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    torch::Tensor grad_x;
    variable_list out(4);
    for (int i = 0; i < 3; ++i) {
      if (!grads[i].defined()) continue;
      const auto g = grads[i].contiguous();
      const auto& w = saved[1 + i];
      grad_x = grad_x.defined() ? grad_x.addmm_(g, w) : torch::mm(g, w);
      out[1 + i] = torch::mm(g.t(), x);
    }
    out[0] = grad_x;  // undefined (zero) where no output had a gradient
    return out;
  }
};

}  // namespace

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
  torch::Tensor q, k, v;  // [b, t, heads * hd] or [.., .., kv_heads * hd]
  if (fusions.qkv_dgrad_sum) {
    auto outs = ProjectQkvFn::apply(x.reshape({b * t, x.size(2)}), w.wq, w.wk, w.wv);
    q = outs[0];
    k = outs[1];
    v = outs[2];
  } else {
    q = torch::matmul(x, w.wq.t());
    k = torch::matmul(x, w.wk.t());
    v = torch::matmul(x, w.wv.t());
  }
  auto heads = [&](const torch::Tensor& y, int64_t n) { return y.view({b, t, n, hd}); };
  // RoPE before the transpose to [b, n, t, hd]: on the token-major layout its
  // passes (and their gradients) run vectorized.
  q = Rope(heads(q, w.heads), rope).transpose(1, 2);
  k = Rope(heads(k, w.kv_heads), rope).transpose(1, 2);
  v = heads(v, w.kv_heads).transpose(1, 2);
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
