#include "trainer_core/optim/muon_kernels.h"

#include "trainer_core/model/fusions.h"

#ifdef TRELLIS_WITH_KERNELS
#include "kernels/muon_update.h"
#include "trainer_core/model/kernel_args.h"
#endif

namespace trellis::train {
namespace {

void CheckContiguous(const torch::Tensor &t, torch::Dtype dtype, int64_t numel,
                     const char *what) {
  TORCH_CHECK(t.is_cuda() && t.is_contiguous() && t.scalar_type() == dtype &&
                  t.numel() == numel,
              "fused Muon: ", what, " must be a contiguous CUDA ",
              c10::toString(dtype), " tensor of ", numel, " elements");
}

} // namespace

bool FusedMuonAvailable(const torch::Tensor &grad) {
#ifdef TRELLIS_WITH_KERNELS
  return grad.is_cuda() && grad.scalar_type() == torch::kFloat &&
         ActiveFusions().muon_update;
#else
  (void)grad;
  return false;
#endif
}

void FusedMuonMomentum(const torch::Tensor &grad, const torch::Tensor &mom,
                       const torch::Tensor &update, double momentum,
                       const torch::Tensor &grad_scale) {
  const int64_t n = grad.numel();
  CheckContiguous(grad, torch::kFloat, n, "grad");
  CheckContiguous(mom, torch::kFloat, n, "momentum");
  CheckContiguous(update, update.scalar_type(), n, "update");
  if (grad_scale.defined())
    CheckContiguous(grad_scale, torch::kFloat, 1, "gradient scale");
#ifdef TRELLIS_WITH_KERNELS
  auto stream = CurrentStream();
  const auto m = static_cast<float>(momentum);
  const float *scale =
      grad_scale.defined() ? grad_scale.data_ptr<float>() : nullptr;
  if (update.scalar_type() == torch::kBFloat16) {
    kernels::MuonMomentum(grad.data_ptr<float>(), mom.data_ptr<float>(),
                          Bf16(update), n, m, scale, stream);
  } else {
    kernels::MuonMomentum(grad.data_ptr<float>(), mom.data_ptr<float>(),
                          update.data_ptr<float>(), n, m, scale, stream);
  }
  torch::autograd::impl::bump_version(mom);
  torch::autograd::impl::bump_version(update);
#else
  (void)momentum;
  TORCH_CHECK(false, "fused Muon: built without kernels/");
#endif
}

CopyRows CheckedCopyRows(const torch::Tensor &copy, int64_t n) {
  // A dense copy, or rows of one (dense within a row) with gaps between them.
  if (copy.defined() && !copy.is_contiguous()) {
    TORCH_CHECK(copy.is_cuda() && copy.scalar_type() == torch::kBFloat16 &&
                    copy.dim() == 2 && copy.numel() == n && copy.stride(1) == 1 &&
                    copy.stride(0) >= copy.size(1),
                "fused Muon: the bf16 copy must be a CUDA bf16 tensor of ", n,
                " elements, contiguous or [rows, cols] with dense rows, got ",
                copy.sizes(), " strides ", copy.strides());
    return {copy.size(1), copy.stride(0)};
  }
  if (copy.defined())
    CheckContiguous(copy, torch::kBFloat16, n, "bf16 copy");
  return {n, n};
}

void FusedApplyUpdate(const torch::Tensor &value, const torch::Tensor &ortho,
                      double decay, double step, const torch::Tensor &copy) {
  const int64_t n = value.numel();
  CheckContiguous(value, torch::kFloat, n, "value");
  CheckContiguous(ortho, torch::kFloat, n, "update");
  const auto [copy_row, copy_stride] = CheckedCopyRows(copy, n);
#ifdef TRELLIS_WITH_KERNELS
  kernels::ApplyUpdate(value.data_ptr<float>(), ortho.data_ptr<float>(), n,
                       static_cast<float>(decay), static_cast<float>(step),
                       copy.defined() ? Bf16(copy) : nullptr, copy_row,
                       copy_stride, CurrentStream());
  // Written behind ATen's back: later readers (CastCache) must see a change.
  torch::autograd::impl::bump_version(value);
  if (copy.defined())
    torch::autograd::impl::bump_version(copy);
#else
  (void)decay, (void)step, (void)copy_row, (void)copy_stride;
  TORCH_CHECK(false, "fused Muon: built without kernels/");
#endif
}

} // namespace trellis::train
