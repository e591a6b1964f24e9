#include "trainer_core/optim/ns_kernel.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>

#include "trainer_core/optim/muon_kernels.h"

#ifdef TRELLIS_WITH_KERNELS
#include "kernels/newton_schulz.h"
#include "trainer_core/model/kernel_args.h"
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

namespace {

void CheckInput(const torch::Tensor& g, const char* who) {
  TORCH_CHECK(g.is_cuda() && g.scalar_type() == torch::kFloat && g.dim() == 3 && g.is_contiguous(),
              who, ": a contiguous CUDA fp32 [batch, m, n] tensor");
}

#ifdef TRELLIS_WITH_KERNELS
// One plan (work buffers, cuBLASLt descriptors) per shape, kept for the run:
// an optimizer step meets the same few shapes every time.
kernels::BatchedNewtonSchulz& PlanFor(const torch::Tensor& g) {
  using Shape = std::tuple<int, int, int>;
  static std::map<Shape, std::unique_ptr<kernels::BatchedNewtonSchulz>> plans;
  const Shape shape{static_cast<int>(g.size(0)), static_cast<int>(g.size(1)),
                    static_cast<int>(g.size(2))};
  auto& plan = plans[shape];
  if (!plan)
    plan = std::make_unique<kernels::BatchedNewtonSchulz>(std::get<0>(shape), std::get<1>(shape),
                                                          std::get<2>(shape));
  return *plan;
}
#endif

}  // namespace

// nullptr streams below: the legacy default stream, which is LibTorch's
// current stream here (trainer_core never switches streams in the optimizer).
torch::Tensor KernelNewtonSchulz(const torch::Tensor& g, int steps) {
  CheckInput(g, "KernelNewtonSchulz");
#ifdef TRELLIS_WITH_KERNELS
  auto out = torch::empty_like(g);
  PlanFor(g).Run(g.data_ptr<float>(), out.data_ptr<float>(), nullptr, steps);
  return out;
#else
  (void)steps;
  TORCH_CHECK(false, "KernelNewtonSchulz: built without kernels/");
  return g;
#endif
}

void KernelNewtonSchulzApply(const torch::Tensor& g, int steps, const torch::Tensor& value,
                             double decay, double step, const torch::Tensor& copy) {
  CheckInput(g, "KernelNewtonSchulzApply");
  const int64_t n = g.numel();
  TORCH_CHECK(value.is_cuda() && value.scalar_type() == torch::kFloat && value.is_contiguous() &&
                  value.numel() == n,
              "KernelNewtonSchulzApply: value must be a contiguous CUDA fp32 tensor of ", n,
              " elements");
  const CopyRows rows = CheckedCopyRows(copy, n);
#ifdef TRELLIS_WITH_KERNELS
  PlanFor(g).RunApply(g.data_ptr<float>(), value.data_ptr<float>(), static_cast<float>(decay),
                      static_cast<float>(step), copy.defined() ? Bf16(copy) : nullptr, rows.row,
                      rows.stride, nullptr, steps);
  // Written behind ATen's back: later readers (CastCache) must see a change.
  torch::autograd::impl::bump_version(value);
  if (copy.defined()) torch::autograd::impl::bump_version(copy);
#else
  (void)steps, (void)decay, (void)step, (void)rows;
  TORCH_CHECK(false, "KernelNewtonSchulzApply: built without kernels/");
#endif
}

}  // namespace trellis::train
