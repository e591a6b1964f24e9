#include "trainer_core/parallel/grad_add.h"

#include <cstdint>

#include "trainer_core/model/fusions.h"

#ifdef TRELLIS_WITH_KERNELS
#include <cuda_bf16.h>

#include "kernels/accumulate.h"
#endif

namespace trellis::train {
namespace {

#ifdef TRELLIS_WITH_KERNELS
bool Aligned16(const torch::Tensor& t) {
  return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0;
}

bool UseKernel(const torch::Tensor& into, const torch::Tensor& grad) {
  return ActiveFusions().grad_add && into.is_cuda() && into.scalar_type() == torch::kFloat &&
         grad.scalar_type() == torch::kBFloat16 && grad.device() == into.device() &&
         into.is_contiguous() && grad.is_contiguous() && into.numel() == grad.numel() &&
         Aligned16(into) && Aligned16(grad);
}
#endif

}  // namespace

void AddGrad(torch::Tensor& into, const torch::Tensor& grad) {
#ifdef TRELLIS_WITH_KERNELS
  if (UseKernel(into, grad)) {
    // nullptr: LibTorch's current stream here (model/swiglu.cc says why).
    kernels::AccumulateBf16(into.data_ptr<float>(),
                            reinterpret_cast<const __nv_bfloat16*>(grad.data_ptr<at::BFloat16>()),
                            /*num_bufs=*/1, into.numel(), /*buf_stride=*/0, nullptr);
    return;
  }
#endif
  into.add_(grad.view_as(into));
}

}  // namespace trellis::train
