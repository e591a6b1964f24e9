#include "trainer_core/model/expert_wgrad_op.h"

#include <functional>
#include <vector>

#include "trainer_core/compat.h"
#include "trainer_core/model/fusions.h"
#include "trainer_core/model/swiglu_op.h"

#ifdef TRELLIS_WITH_KERNELS
#include "kernels/cuda_check.h"
#include "kernels/expert_wgrad.h"
#include "trainer_core/model/kernel_args.h"
#endif

namespace trellis::train {

bool ExpertWgradAvailable(torch::Device device, torch::ScalarType dtype) {
#if defined(TRELLIS_WITH_KERNELS) && defined(TRELLIS_HAS_GROUPED_MM)
  return ActiveFusions().expert_wgrad && device.is_cuda() && dtype == torch::kBFloat16;
#else
  (void)device, (void)dtype;
  return false;
#endif
}

#if defined(TRELLIS_WITH_KERNELS) && defined(TRELLIS_HAS_GROUPED_MM)
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What a layer's two GEMMs share: the slots per expert on their way to the
// host (written through its mapping, compat::WriteToMappedHost: a cudaMemcpy
// would stand behind a checkpoint's copy in flight, and backward with it),
// and where the weight gradients go.
struct Shared : torch::CustomClassHolder {
  torch::Tensor rows;  // int64 [E], pinned
  cudaEvent_t copied = nullptr;
  std::function<WgradTarget(int)> into;

  ~Shared() override {
    // `rows` goes back to the pinned cache only once the kernel wrote it.
    if (copied == nullptr) return;
    cudaEventSynchronize(copied);
    cudaEventDestroy(copied);
  }
  // Waits for the write, which backward finds long done.
  const int64_t* Rows() const {
    TRELLIS_CUDA_CHECK(cudaEventSynchronize(copied));
    return rows.data_ptr<int64_t>();
  }
};

// The targets of parts [first, first + parts), checked against the weight's
// [E, parts * m, n].
std::vector<WgradTarget> Targets(const Shared& shared, int first, int parts,
                                 const torch::Tensor& w) {
  const int64_t experts = w.size(0), m = w.size(1) / parts, n = w.size(2);
  std::vector<WgradTarget> out;
  for (int p = 0; p < parts; ++p) {
    WgradTarget t = shared.into(first + p);
    TORCH_CHECK(t.acc.scalar_type() == torch::kFloat && t.acc.is_contiguous() &&
                    t.acc.device() == w.device() &&
                    t.acc.sizes() == torch::IntArrayRef({experts, m, n}),
                "expert_wgrad: part ", first + p, "'s gradient must be fp32 contiguous [", experts,
                ", ", m, ", ", n, "] on ", w.device(), ", got ", t.acc.sizes(), " ",
                t.acc.scalar_type(), " on ", t.acc.device());
    TORCH_CHECK(out.empty() || out[0].first == t.first,
                "expert_wgrad: the parts of one GEMM must start the step together");
    out.push_back(std::move(t));
  }
  return out;
}

// y = x @ w[e]^T over each expert's rows (x [T, K], w [E, N, K], offs the
// groups' ends). Backward: x's gradient by the grouped GEMM, and w's summed
// into the targets of parts [first, first + parts), N split evenly.
class GroupedLinear : public torch::autograd::Function<GroupedLinear> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& offs, c10::intrusive_ptr<Shared> shared,
                               int64_t first, int64_t parts) {
    ctx->save_for_backward({x, w, offs});
    ctx->saved_data["shared"] = c10::IValue::make_capsule(std::move(shared));
    ctx->saved_data["first"] = first;
    ctx->saved_data["parts"] = parts;
    return compat::GroupedMm(x, w.transpose(-2, -1), offs);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto x = saved[0].contiguous(), w = saved[1], offs = saved[2];
    const auto shared =
        c10::static_intrusive_pointer_cast<Shared>(ctx->saved_data["shared"].toCapsule());
    const int first = static_cast<int>(ctx->saved_data["first"].toInt());
    const int parts = static_cast<int>(ctx->saved_data["parts"].toInt());
    const auto dy = grads[0].to(x.scalar_type()).contiguous();
    const auto targets = Targets(*shared, first, parts, w);

    kernels::ExpertWgrad a;
    a.dy = Bf16(dy), a.ld_dy = dy.size(1), a.x = Bf16(x), a.ld_x = x.size(1);
    a.rows = shared->Rows(), a.experts = static_cast<int>(w.size(0));
    a.m = w.size(1) / parts, a.n = w.size(2), a.overwrite = targets[0].first;
    a.acc = targets[0].acc.data_ptr<float>(), a.expert_stride = a.m * a.n;
    // Parts laid out one after another (the stored layout of parallel/
    // expert_form.h) are one strided batch per expert; others, a call each.
    const int64_t gap = parts > 1 ? targets[1].acc.data_ptr<float>() - a.acc : 0;
    bool batched = parts == 1 || gap >= a.experts * a.m * a.n;
    for (int p = 2; batched && p < parts; ++p)
      batched = targets[p].acc.data_ptr<float>() - a.acc == p * gap;
    torch::Tensor dx;
    const std::function<void()> input_grad = [&] { dx = compat::GroupedMm(dy, w, offs); };
    if (batched) {
      a.parts = parts, a.part_stride = gap;
      kernels::ExpertWgradFp32(a, CurrentStream(), input_grad);
    } else {
      for (int p = 0; p < parts; ++p) {
        kernels::ExpertWgrad one = a;
        one.dy = a.dy + p * a.m, one.acc = targets[p].acc.data_ptr<float>();
        kernels::ExpertWgradFp32(one, CurrentStream(),
                                 p == 0 ? input_grad : std::function<void()>());
      }
    }
    return {
        dx, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor RunExpertsSummingWgrad(const torch::Tensor& xs, const torch::Tensor& counts,
                                     const torch::Tensor& offs, const ExpertWeights& w) {
  TORCH_CHECK(ExpertWgradAvailable(xs.device(), xs.scalar_type()),
              "expert_wgrad: needs CUDA bf16 experts with the fusion on, got ", xs.scalar_type(),
              " on ", xs.device());
  TORCH_CHECK(w.wgrad_into && w.gate_up.defined() && w.down.defined(),
              "expert_wgrad: needs gate_up, down and wgrad_into");
  auto shared = c10::make_intrusive<Shared>();
  shared->into = w.wgrad_into;
  shared->rows = torch::empty({counts.size(0)},
                              torch::TensorOptions().dtype(torch::kLong).pinned_memory(true));
  compat::WriteToMappedHost(counts.to(torch::kLong).contiguous(), shared->rows);
  TRELLIS_CUDA_CHECK(cudaEventCreateWithFlags(&shared->copied, cudaEventDisableTiming));
  TRELLIS_CUDA_CHECK(cudaEventRecord(shared->copied, CurrentStream()));
  auto gate_up = GroupedLinear::apply(xs, w.gate_up, offs, shared, int64_t{0}, int64_t{2});
  return GroupedLinear::apply(SwiGluPacked(gate_up), w.down, offs, shared, int64_t{2}, int64_t{1});
}

#else

torch::Tensor RunExpertsSummingWgrad(const torch::Tensor& xs, const torch::Tensor&,
                                     const torch::Tensor&, const ExpertWeights&) {
  TORCH_CHECK(false, "expert_wgrad: this build has no kernels/ or no grouped GEMM (experts on ",
              xs.device(), ")");
  return xs;
}

#endif

}  // namespace trellis::train
