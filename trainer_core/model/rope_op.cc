#include "trainer_core/model/rope_op.h"

#include "trainer_core/model/fusions.h"

#ifdef TRELLIS_WITH_KERNELS
#include "kernels/rope.h"
#include "trainer_core/model/kernel_args.h"
#endif

namespace trellis::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The tables for the first t positions, as [t, 1, half] in x's dtype.
std::pair<torch::Tensor, torch::Tensor> Tables(const RopeCache& rope, int64_t t,
                                               torch::ScalarType type) {
  return {rope.cos.narrow(0, 0, t).to(type).unsqueeze(1),
          rope.sin.narrow(0, 0, t).to(type).unsqueeze(1)};
}

// sign +1: forward; -1: the inverse rotation (backward).
torch::Tensor RotateAten(const torch::Tensor& x, const RopeCache& rope, double sign) {
  const int64_t half = x.size(3) / 2;
  auto [cos, sin] = Tables(rope, x.size(1), x.scalar_type());
  if (sign < 0) sin = -sin;
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

#ifdef TRELLIS_WITH_KERNELS
// Rows of x are tokens: flattening [B, T] must be one stride, and each row's
// heads contiguous.
bool RowsFlatten(const torch::Tensor& x) {
  const int64_t d = x.size(3), heads = x.size(2), t = x.size(1);
  return x.stride(3) == 1 && x.stride(2) == d && x.stride(1) >= heads * d &&
         x.stride(0) == t * x.stride(1);
}

bool UseKernel(const torch::Tensor& x, const RopeCache& rope) {
  return ActiveFusions().rope && x.is_cuda() && x.scalar_type() == torch::kBFloat16 &&
         rope.cos.scalar_type() == torch::kFloat && rope.cos.is_contiguous() &&
         rope.sin.is_contiguous() && x.numel() > 0;
}

torch::Tensor RotateKernel(const torch::Tensor& in, const RopeCache& rope, bool inverse) {
  const auto x = RowsFlatten(in) ? in : in.contiguous();
  const int64_t b = x.size(0), t = x.size(1), heads = x.size(2), d = x.size(3);
  auto out = torch::empty({b, t, heads, d}, x.options());
  kernels::Rope(Bf16(x), x.stride(1), b * t, t, static_cast<int>(heads), static_cast<int>(d),
                rope.cos.data_ptr<float>(), rope.sin.data_ptr<float>(), inverse, Bf16(out),
                CurrentStream());
  return out;
}
#endif

class RopeFn : public torch::autograd::Function<RopeFn> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const RopeCache& rope) {
    // The tables are the model's, alive for the whole step.
    ctx->saved_data["cos"] = rope.cos;
    ctx->saved_data["sin"] = rope.sin;
#ifdef TRELLIS_WITH_KERNELS
    if (UseKernel(x, rope)) {
      ctx->saved_data["kernel"] = true;
      return RotateKernel(x, rope, /*inverse=*/false);
    }
#endif
    ctx->saved_data["kernel"] = false;
    return RotateAten(x, rope, 1.0);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const RopeCache rope{ctx->saved_data["cos"].toTensor(), ctx->saved_data["sin"].toTensor()};
#ifdef TRELLIS_WITH_KERNELS
    if (ctx->saved_data["kernel"].toBool())
      return {RotateKernel(grads[0].to(torch::kBFloat16), rope, /*inverse=*/true),
              torch::Tensor()};
#endif
    return {RotateAten(grads[0], rope, -1.0), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor Rope(const torch::Tensor& x, const RopeCache& rope) {
  TORCH_CHECK(x.dim() == 4 && x.size(3) % 2 == 0, "Rope: x [B, T, heads, even d], got ",
              x.sizes());
  TORCH_CHECK(rope.cos.size(0) >= x.size(1) && rope.cos.size(1) == x.size(3) / 2,
              "Rope: tables [>= ", x.size(1), ", ", x.size(3) / 2, "], got ", rope.cos.sizes());
  return RopeFn::apply(x, rope);
}

}  // namespace trellis::train
