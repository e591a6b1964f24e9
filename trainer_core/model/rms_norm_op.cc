#include "trainer_core/model/rms_norm_op.h"

#include <cstdint>
#include <utility>

#include "trainer_core/compat.h"
#include "trainer_core/model/fusions.h"

#ifdef TRELLIS_WITH_KERNELS
#include "kernels/rms_norm.h"
#include "trainer_core/model/kernel_args.h"
#endif

namespace trellis::train {
namespace {

torch::Tensor RmsNormAten(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  if (auto fused = compat::FusedRmsNorm(x, weight, eps)) return *fused;
  // Statistics in at least fp32 even when activations are bf16.
  auto acc = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  auto xf = x.to(acc);
  auto normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return normed.to(x.scalar_type()) * weight;
}

#ifdef TRELLIS_WITH_KERNELS
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool UseKernel(const torch::Tensor& x, const torch::Tensor& a, const torch::Tensor& w) {
  const auto bf16 = [](const torch::Tensor& t) {
    return t.is_cuda() && t.scalar_type() == torch::kBFloat16;
  };
  return ActiveFusions().rms_norm && bf16(x) && bf16(w) && (!a.defined() || bf16(a)) &&
         w.dim() == 1 && x.dim() >= 1 && w.size(0) == x.size(-1) &&
         (!a.defined() || a.sizes() == x.sizes()) && kernels::RmsNormSupports(x.size(-1));
}

// The kernels read 16-byte vectors: a contiguous tensor starting on 16 bytes
// (a weight viewed out of a flat buffer may not), else a copy.
torch::Tensor Vectorizable(const torch::Tensor& t) {
  if (t.is_contiguous() && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0) return t;
  return torch::empty(t.sizes(), t.options().memory_format(torch::MemoryFormat::Contiguous))
      .copy_(t);
}

int64_t RowsOf(const torch::Tensor& x) { return x.numel() / x.size(-1); }

// {normed, rstd}; y written where a is defined.
std::pair<torch::Tensor, torch::Tensor> Forward(const torch::Tensor& x, const torch::Tensor& a,
                                                const torch::Tensor& w, double eps,
                                                const torch::Tensor& y) {
  const int64_t rows = RowsOf(x), h = x.size(-1);
  auto out = torch::empty(x.sizes(), x.options());
  auto rstd = torch::empty({rows}, x.options().dtype(torch::kFloat));
  kernels::RmsNormForward(Bf16(x), a.defined() ? Bf16(a) : nullptr, Bf16(w), rows, h,
                          static_cast<float>(eps), a.defined() ? Bf16(y) : nullptr, Bf16(out),
                          rstd.data_ptr<float>(), CurrentStream());
  return {out, rstd};
}

// {grad of y (plus g_res), grad of w in w's dtype}
std::pair<torch::Tensor, torch::Tensor> Backward(const torch::Tensor& g_out,
                                                 const torch::Tensor& g_res, const torch::Tensor& y,
                                                 const torch::Tensor& w,
                                                 const torch::Tensor& rstd) {
  const int64_t rows = RowsOf(y), h = y.size(-1);
  const auto go = Vectorizable(g_out.to(torch::kBFloat16));
  const auto gr = g_res.defined() ? Vectorizable(g_res.to(torch::kBFloat16)) : g_res;
  auto g_y = torch::empty(y.sizes(), y.options());
  const auto f32 = y.options().dtype(torch::kFloat);
  auto g_w = torch::empty({h}, f32);
  auto workspace = torch::empty({kernels::RmsNormBackwardWorkspace(rows, h)}, f32);
  kernels::RmsNormBackward(Bf16(go), gr.defined() ? Bf16(gr) : nullptr, Bf16(y), Bf16(w),
                           rstd.data_ptr<float>(), rows, h, Bf16(g_y), g_w.data_ptr<float>(),
                           workspace.data_ptr<float>(), CurrentStream());
  return {g_y, g_w.to(w.scalar_type())};
}

class NormFn : public torch::autograd::Function<NormFn> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               double eps) {
    const auto xv = Vectorizable(x), wv = Vectorizable(w);
    auto [out, rstd] = Forward(xv, torch::Tensor(), wv, eps, torch::Tensor());
    ctx->save_for_backward({xv, wv, rstd});
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    auto [g_x, g_w] = Backward(grads[0], torch::Tensor(), s[0], s[1], s[2]);
    return {g_x, g_w, torch::Tensor()};
  }
};

class AddNormFn : public torch::autograd::Function<AddNormFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& a,
                               const torch::Tensor& w, double eps) {
    const auto xv = Vectorizable(x), av = Vectorizable(a), wv = Vectorizable(w);
    auto y = torch::empty(x.sizes(), x.options());
    auto [out, rstd] = Forward(xv, av, wv, eps, y);
    ctx->save_for_backward({y, wv, rstd});
    return {y, out};
  }
  // x and a get the same gradient: the residual's plus the norm's.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    torch::Tensor g_out = grads[1];
    if (!g_out.defined()) g_out = torch::zeros_like(s[0]);
    auto [g_y, g_w] = Backward(g_out, grads[0], s[0], s[1], s[2]);
    return {g_y, g_y, g_w, torch::Tensor()};
  }
};
#endif

}  // namespace

torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
#ifdef TRELLIS_WITH_KERNELS
  if (UseKernel(x, torch::Tensor(), weight)) return NormFn::apply(x, weight, eps);
#endif
  return RmsNormAten(x, weight, eps);
}

ResidualNorm AddRmsNorm(const torch::Tensor& x, const torch::Tensor& a, const torch::Tensor& weight,
                        double eps) {
#ifdef TRELLIS_WITH_KERNELS
  if (UseKernel(x, a, weight)) {
    auto outs = AddNormFn::apply(x, a, weight, eps);
    return {outs[0], outs[1]};
  }
#endif
  auto y = x + a;
  return {y, RmsNormAten(y, weight, eps)};
}

}  // namespace trellis::train
