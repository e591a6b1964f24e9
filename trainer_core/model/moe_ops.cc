#include "trainer_core/model/moe_ops.h"

#include <cstdint>
#include <utility>

#include "trainer_core/model/fusions.h"

#ifdef TRELLIS_WITH_KERNELS
#include "kernels/moe_permute.h"
#include "trainer_core/model/kernel_args.h"
#endif

namespace trellis::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kMaxSlots = int64_t{1} << 31;  // the dispatch indexes slots with int32

#ifdef TRELLIS_WITH_KERNELS
// Rows the kernels read as they are: whole rows in 16-byte words.
bool KernelRows(const torch::Tensor& t) {
  return t.is_cuda() && t.scalar_type() == torch::kBFloat16 && t.dim() == 2 && t.size(1) > 0 &&
         t.size(1) % 8 == 0 && t.is_contiguous() &&
         reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

// Decided once in forward and kept for backward, so that a layer's two passes
// take the same path.
bool UseKernels(const torch::Tensor& rows, int64_t slots, const torch::Tensor* gates) {
  return ActiveFusions().moe_kernels && KernelRows(rows) && slots < kMaxSlots &&
         (gates == nullptr || gates->scalar_type() == torch::kFloat);
}

// An incoming gradient as the kernels read it; a copy only where it is a view
// that is not (a fresh allocation is aligned).
torch::Tensor KernelReady(torch::Tensor g) {
  if (!KernelRows(g)) g = g.contiguous();
  if (!KernelRows(g)) g = g.clone();
  TORCH_CHECK(KernelRows(g), "MoE kernels: the gradient is not CUDA bf16 rows");
  return g;
}

torch::Tensor Int32(const torch::Tensor& index) { return index.to(torch::kInt).contiguous(); }

torch::Tensor DispatchKernel(const torch::Tensor& x, const torch::Tensor& slot_to_row,
                             int64_t k) {
  auto out = torch::empty({x.size(0) * k, x.size(1)}, x.options());
  kernels::MoePermute(Bf16(x), slot_to_row.data_ptr<int32_t>(), x.size(0), static_cast<int>(k),
                      x.size(1), Bf16(out), CurrentStream());
  return out;
}

// out[t] = sum_j gate * rows[slot_to_row[t * k + j]]; gates == nullptr: gate 1.
torch::Tensor SumSlotsKernel(const torch::Tensor& rows, const float* gates,
                             const torch::Tensor& slot_to_row, int64_t k) {
  const int64_t n = rows.size(0) / k;
  auto out = torch::empty({n, rows.size(1)}, rows.options());
  kernels::MoeCombine(Bf16(rows), gates, slot_to_row.data_ptr<int32_t>(), n,
                      static_cast<int>(k), rows.size(1), Bf16(out), CurrentStream());
  return out;
}

// {grad_expert_out, grad_gates} in one pass over the dispatch rows.
std::pair<torch::Tensor, torch::Tensor> CombineBackwardKernel(const torch::Tensor& grad_y,
                                                              const torch::Tensor& expert_out,
                                                              const torch::Tensor& gates,
                                                              const torch::Tensor& row_to_slot,
                                                              int64_t k) {
  auto grad_out = torch::empty(expert_out.sizes(), expert_out.options());
  auto grad_gates = torch::empty(gates.sizes(), gates.options());
  kernels::MoeCombineBackward(Bf16(grad_y), Bf16(expert_out), gates.data_ptr<float>(),
                              row_to_slot.data_ptr<int32_t>(), grad_y.size(0),
                              static_cast<int>(k), grad_y.size(1), Bf16(grad_out),
                              grad_gates.data_ptr<float>(), CurrentStream());
  return {grad_out, grad_gates};
}
#endif

class DispatchFn : public torch::autograd::Function<DispatchFn> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& row_to_slot, const torch::Tensor& slot_to_row,
                               int64_t k) {
    ctx->saved_data["k"] = k;
#ifdef TRELLIS_WITH_KERNELS
    if (UseKernels(x, x.size(0) * k, nullptr)) {
      ctx->saved_data["kernels"] = true;
      const auto slot_to_row32 = Int32(slot_to_row);
      ctx->save_for_backward({slot_to_row32});
      return DispatchKernel(x, slot_to_row32, k);
    }
#endif
    ctx->saved_data["kernels"] = false;
    ctx->save_for_backward({slot_to_row});
    return x.index_select(0, k == 1 ? row_to_slot : row_to_slot.div(k, "floor"));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto slot_to_row = ctx->get_saved_variables()[0];
    const int64_t k = ctx->saved_data["k"].toInt();
#ifdef TRELLIS_WITH_KERNELS
    if (ctx->saved_data["kernels"].toBool()) {
      return {SumSlotsKernel(KernelReady(grads[0]), nullptr, slot_to_row, k), torch::Tensor(),
              torch::Tensor(), torch::Tensor()};
    }
#endif
    // index_select's own backward would scatter-add (atomics on CUDA).
    auto g = grads[0].index_select(0, slot_to_row);
    if (k > 1) g = g.view({-1, k, g.size(1)}).sum(1);
    return {g, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

class CombineFn : public torch::autograd::Function<CombineFn> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& expert_out,
                               const torch::Tensor& gates, const torch::Tensor& row_to_slot,
                               const torch::Tensor& slot_to_row, int64_t k) {
    ctx->saved_data["k"] = k;
#ifdef TRELLIS_WITH_KERNELS
    if (UseKernels(expert_out, expert_out.size(0), &gates)) {
      ctx->saved_data["kernels"] = true;
      auto fp32_gates = gates.contiguous();
      ctx->save_for_backward({expert_out, fp32_gates, Int32(row_to_slot)});
      return SumSlotsKernel(expert_out, fp32_gates.data_ptr<float>(), Int32(slot_to_row), k);
    }
#endif
    // The gated product in the rows' dtype, as the expression would be.
    ctx->saved_data["kernels"] = false;
    auto by_slot = expert_out.index_select(0, slot_to_row).view({gates.size(0), k, -1});
    ctx->save_for_backward({by_slot, gates, row_to_slot});
    return (by_slot * gates.to(expert_out.scalar_type()).unsqueeze(-1)).sum(1);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
#ifdef TRELLIS_WITH_KERNELS
    if (ctx->saved_data["kernels"].toBool()) {
      const int64_t k = ctx->saved_data["k"].toInt();
      auto [grad_out, grad_gates] =
          CombineBackwardKernel(KernelReady(grads[0]), saved[0], saved[1], saved[2], k);
      return {grad_out, grad_gates, torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
#endif
    const auto& by_slot = saved[0];  // [N, k, H]
    const auto& gates = saved[1];
    const auto& row_to_slot = saved[2];
    auto grad_y = grads[0].unsqueeze(1);  // [N, 1, H]
    auto grad_by_slot = grad_y * gates.to(by_slot.scalar_type()).unsqueeze(-1);
    // Back to dispatch order by a gather through the inverse permutation.
    auto grad_out = grad_by_slot.reshape({-1, by_slot.size(2)}).index_select(0, row_to_slot);
    auto grad_gates = (grad_y * by_slot).sum(-1).to(gates.scalar_type());
    return {grad_out, grad_gates, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

void CheckIndices(const char* op, const torch::Tensor& rows, const torch::Tensor& row_to_slot,
                  const torch::Tensor& slot_to_row, int64_t slots) {
  for (const auto* index : {&row_to_slot, &slot_to_row}) {
    TORCH_CHECK(index->dim() == 1 && index->numel() == slots, op, ": index tensors of ", slots,
                " entries, got ", index->sizes());
    TORCH_CHECK(index->scalar_type() == torch::kInt || index->scalar_type() == torch::kLong, op,
                ": int32 or int64 indices");
    TORCH_CHECK(index->device() == rows.device(), op, ": indices on the rows' device");
  }
}

}  // namespace

torch::Tensor DispatchRows(const torch::Tensor& x, const torch::Tensor& row_to_slot,
                           const torch::Tensor& slot_to_row, int64_t k) {
  TORCH_CHECK(x.dim() == 2 && k > 0, "DispatchRows: x [N, H] and k > 0");
  CheckIndices("DispatchRows", x, row_to_slot, slot_to_row, x.size(0) * k);
  return DispatchFn::apply(x, row_to_slot, slot_to_row, k);
}

torch::Tensor CombineSlots(const torch::Tensor& expert_out, const torch::Tensor& gates,
                           const torch::Tensor& row_to_slot, const torch::Tensor& slot_to_row,
                           int64_t k) {
  TORCH_CHECK(k > 0 && gates.dim() == 2 && gates.size(1) == k && expert_out.dim() == 2 &&
                  expert_out.size(0) == gates.size(0) * k,
              "CombineSlots: expert_out [N * k, H] and gates [N, k], got ", expert_out.sizes(),
              " and ", gates.sizes(), " with k = ", k);
  TORCH_CHECK(gates.device() == expert_out.device(), "CombineSlots: gates on the rows' device");
  CheckIndices("CombineSlots", expert_out, row_to_slot, slot_to_row, expert_out.size(0));
  return CombineFn::apply(expert_out, gates, row_to_slot, slot_to_row, k);
}

torch::Tensor DispatchRunCombine(const torch::Tensor& x, const torch::Tensor& gates,
                                 const torch::Tensor& order, int64_t k,
                                 const std::function<torch::Tensor(const torch::Tensor&)>& run) {
  const int64_t slots = order.numel();
  TORCH_CHECK(slots < kMaxSlots, "MoE: ", slots, " slots; the dispatch indexes them with int32");
  auto row_to_slot = order.to(torch::kInt);
  auto slot_to_row = torch::empty_like(row_to_slot)
                         .scatter_(0, order, torch::arange(slots, row_to_slot.options()));
  auto outs = run(DispatchRows(x, row_to_slot, slot_to_row, k));
  return CombineSlots(outs, gates, row_to_slot, slot_to_row, k);
}

}  // namespace trellis::train
