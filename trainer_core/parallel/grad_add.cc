#include "trainer_core/parallel/grad_add.h"

#ifdef TRELLIS_WITH_KERNELS
#include "kernels/accumulate.h"
#include "trainer_core/model/kernel_args.h"
#endif

namespace trellis::train {

void AddGradInto(torch::Tensor& into, const torch::Tensor& grad, bool use_kernel) {
  TORCH_CHECK(into.scalar_type() == torch::kFloat && into.numel() == grad.numel(),
              "AddGradInto: an fp32 gradient of ", grad.numel(), " elements, got ",
              into.scalar_type(), " of ", into.numel());
#ifdef TRELLIS_WITH_KERNELS
  if (use_kernel && into.is_cuda() && grad.is_cuda() && grad.scalar_type() == torch::kBFloat16 &&
      into.is_contiguous() && grad.is_contiguous() && into.device() == grad.device()) {
    torch::NoGradGuard no_grad;
    kernels::AccumulateBf16Rows(into.data_ptr<float>(), Bf16(grad), 1, grad.numel(),
                                grad.numel(), /*overwrite=*/false, CurrentStream());
    return;
  }
#else
  (void)use_kernel;
#endif
  into.add_(grad.view(into.sizes()));
}

}  // namespace trellis::train
