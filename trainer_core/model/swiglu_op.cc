#include "trainer_core/model/swiglu_op.h"

#include <algorithm>
#include <utility>

#include "trainer_core/model/fusions.h"

#ifdef TRELLIS_WITH_KERNELS
#include "kernels/swiglu.h"
#include "trainer_core/model/kernel_args.h"
#endif

namespace trellis::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// bf16 and half carry too few bits for 1 - s and its products: fp32 inside.
torch::ScalarType MathType(const torch::Tensor& t) {
  const auto type = t.scalar_type();
  return type == torch::kBFloat16 || type == torch::kHalf ? torch::kFloat : type;
}

torch::Tensor ForwardAten(const torch::Tensor& a, const torch::Tensor& b) {
  const auto math = MathType(a);
  const auto am = a.to(math);
  return (am * torch::sigmoid(am) * b.to(math)).to(a.scalar_type());
}

// {grad_a, grad_b}
std::pair<torch::Tensor, torch::Tensor> BackwardAten(const torch::Tensor& grad_h,
                                                     const torch::Tensor& a,
                                                     const torch::Tensor& b) {
  const auto math = MathType(a);
  const auto g = grad_h.to(math), am = a.to(math), bm = b.to(math);
  const auto s = torch::sigmoid(am);
  auto grad_b = g * (am * s);
  auto grad_a = (g * bm) * (s * (1 + am * (1 - s)));
  return {grad_a.to(a.scalar_type()), grad_b.to(b.scalar_type())};
}

#ifdef TRELLIS_WITH_KERNELS
// Decided once in forward and kept for backward, so that a layer's two passes
// take the same path. Any alignment will do (the kernels fall back to scalar
// accesses).
bool UseKernel(const torch::Tensor& a, const torch::Tensor& b) {
  return ActiveFusions().swiglu && a.is_cuda() && a.scalar_type() == torch::kBFloat16 &&
         a.is_contiguous() && b.is_contiguous();
}

torch::Tensor ForwardKernel(const torch::Tensor& a, const torch::Tensor& b) {
  auto h = torch::empty(a.sizes(), a.options());
  kernels::SwiGluForward(Bf16(a), Bf16(b), a.numel(), Bf16(h), CurrentStream());
  return h;
}

// A broadcast or strided gradient (e.g. from a sum) is made dense once.
torch::Tensor DenseGrad(const torch::Tensor& grad_h, torch::IntArrayRef sizes,
                        const torch::Device& device) {
  auto g = grad_h.to(torch::kBFloat16).contiguous();
  TORCH_CHECK(g.sizes() == sizes && g.device() == device,
              "SwiGlu: the gradient must have the output's shape and device");
  return g;
}

std::pair<torch::Tensor, torch::Tensor> BackwardKernel(const torch::Tensor& grad_h,
                                                       const torch::Tensor& a,
                                                       const torch::Tensor& b) {
  const auto g = DenseGrad(grad_h, a.sizes(), a.device());
  auto grad_a = torch::empty(a.sizes(), a.options());
  auto grad_b = torch::empty(b.sizes(), b.options());
  kernels::SwiGluBackward(Bf16(g), Bf16(a), Bf16(b), a.numel(), Bf16(grad_a), Bf16(grad_b),
                          CurrentStream());
  return {grad_a, grad_b};
}

// ab: contiguous [rows, 2F] (gate, up); each kernel walks rows of F pairs.
torch::Tensor PackedForwardKernel(const torch::Tensor& ab, const torch::Tensor& h) {
  const int64_t width = h.size(-1), rows = h.numel() / std::max<int64_t>(width, 1);
  kernels::SwiGluForwardRows(Bf16(ab), Bf16(ab) + width, rows, width, 2 * width, Bf16(h),
                             CurrentStream());
  return h;
}

torch::Tensor PackedBackwardKernel(const torch::Tensor& grad_h, const torch::Tensor& ab) {
  auto out_sizes = ab.sizes().vec();
  const int64_t width = out_sizes.back() / 2;
  out_sizes.back() = width;
  const auto g = DenseGrad(grad_h, out_sizes, ab.device());
  const int64_t rows = g.numel() / std::max<int64_t>(width, 1);
  auto grad_ab = torch::empty(ab.sizes(), ab.options());
  kernels::SwiGluBackwardRows(Bf16(g), Bf16(ab), Bf16(ab) + width, rows, width, 2 * width,
                              Bf16(grad_ab), Bf16(grad_ab) + width, CurrentStream());
  return grad_ab;
}
#endif

std::pair<torch::Tensor, torch::Tensor> Halves(const torch::Tensor& ab) {
  const int64_t width = ab.size(-1) / 2;
  return {ab.narrow(-1, 0, width), ab.narrow(-1, width, width)};
}

class SwiGluPackedFn : public torch::autograd::Function<SwiGluPackedFn> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& ab) {
    ctx->save_for_backward({ab});
    auto [a, b] = Halves(ab);
#ifdef TRELLIS_WITH_KERNELS
    if (UseKernel(ab, ab)) {
      ctx->saved_data["kernel"] = true;
      return PackedForwardKernel(ab, torch::empty(a.sizes(), ab.options()));
    }
#endif
    ctx->saved_data["kernel"] = false;
    return ForwardAten(a, b);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto ab = ctx->get_saved_variables()[0];
#ifdef TRELLIS_WITH_KERNELS
    if (ctx->saved_data["kernel"].toBool()) return {PackedBackwardKernel(grads[0], ab)};
#endif
    auto [a, b] = Halves(ab);
    auto [grad_a, grad_b] = BackwardAten(grads[0], a, b);
    return {torch::cat({grad_a, grad_b}, -1)};
  }
};

class SwiGluFn : public torch::autograd::Function<SwiGluFn> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& a,
                               const torch::Tensor& b) {
    ctx->save_for_backward({a, b});
#ifdef TRELLIS_WITH_KERNELS
    if (UseKernel(a, b)) {
      ctx->saved_data["kernel"] = true;
      return ForwardKernel(a, b);
    }
#endif
    ctx->saved_data["kernel"] = false;
    return ForwardAten(a, b);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
#ifdef TRELLIS_WITH_KERNELS
    if (ctx->saved_data["kernel"].toBool()) {
      auto [grad_a, grad_b] = BackwardKernel(grads[0], saved[0], saved[1]);
      return {grad_a, grad_b};
    }
#endif
    auto [grad_a, grad_b] = BackwardAten(grads[0], saved[0], saved[1]);
    return {grad_a, grad_b};
  }
};

}  // namespace

torch::Tensor SwiGlu(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(
      a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && a.device() == b.device(),
      "SwiGlu: a and b of one shape, dtype and device, got ", a.sizes(), " ", a.scalar_type(), " ",
      a.device(), " and ", b.sizes(), " ", b.scalar_type(), " ", b.device());
  TORCH_CHECK(at::isFloatingType(a.scalar_type()), "SwiGlu: floating-point inputs, got ",
              a.scalar_type());
  return SwiGluFn::apply(a, b);
}

torch::Tensor SwiGluPacked(const torch::Tensor& ab) {
  TORCH_CHECK(ab.dim() >= 1 && ab.size(-1) % 2 == 0,
              "SwiGluPacked: the last dimension holds gate and up, so it must be even, got ",
              ab.sizes());
  TORCH_CHECK(at::isFloatingType(ab.scalar_type()), "SwiGluPacked: floating-point input, got ",
              ab.scalar_type());
  return SwiGluPackedFn::apply(ab);
}

}  // namespace trellis::train
