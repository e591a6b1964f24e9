#include "trainer_core/optim/ns_kernel.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>

#ifdef TRELLIS_WITH_KERNELS
#include "kernels/newton_schulz.h"
#endif

namespace trellis::train {

bool KernelNewtonSchulzEnabled() {
#ifdef TRELLIS_WITH_KERNELS
  static const bool on = [] {
    const char* v = std::getenv("TRELLIS_KERNEL_NS");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
#else
  return false;
#endif
}

torch::Tensor KernelNewtonSchulz(const torch::Tensor& g, int steps) {
  TORCH_CHECK(g.is_cuda() && g.scalar_type() == torch::kFloat && g.dim() == 3 && g.is_contiguous(),
              "KernelNewtonSchulz: a contiguous CUDA fp32 [batch, m, n] tensor");
#ifdef TRELLIS_WITH_KERNELS
  // One plan (work buffers, cuBLASLt descriptors) per shape, kept for the run:
  // an optimizer step meets the same few shapes every time.
  using Shape = std::tuple<int, int, int>;
  static std::map<Shape, std::unique_ptr<kernels::BatchedNewtonSchulz>> plans;
  const Shape shape{static_cast<int>(g.size(0)), static_cast<int>(g.size(1)),
                    static_cast<int>(g.size(2))};
  auto& plan = plans[shape];
  if (!plan)
    plan = std::make_unique<kernels::BatchedNewtonSchulz>(std::get<0>(shape), std::get<1>(shape),
                                                          std::get<2>(shape));
  auto out = torch::empty_like(g);
  // nullptr: the legacy default stream, which is LibTorch's current stream
  // here (trainer_core never switches streams).
  plan->Run(g.data_ptr<float>(), out.data_ptr<float>(), nullptr, steps);
  return out;
#else
  (void)steps;
  TORCH_CHECK(false, "KernelNewtonSchulz: built without kernels/");
  return g;
#endif
}

}  // namespace trellis::train
