// ShardedModel's expert blocks in expert_form.h's compute form: the bf16
// copy that is gathered, the views forward multiplies, and the way their
// gradient reaches the fp32 shard (added part by part, sent to the owners, or
// summed there by the expert_wgrad GEMMs).
#include "trainer_core/model/expert_wgrad_op.h"
#include "trainer_core/parallel/expert_form.h"
#include "trainer_core/parallel/fsdp.h"

namespace trellis::train {

bool ShardedModel::ExpertsInComputeForm() const {
  return gate_up_gemm_ && CopiesInUse() && expert_gather_ != ExpertGather::kFp8 &&
         mesh_.per_rank() > 0;
}

const torch::Tensor& ShardedModel::ExpertCopy(ExpertShard& e) {
  if (!ExpertsInComputeForm()) return e.compute.Get(e.value, compute_dtype_);
  const int64_t count = e.count;
  return e.compute.Get(e.value, compute_dtype_, expert_form::kCastLayout,
                       [count](const torch::Tensor& master, torch::Tensor& copy) {
                         expert_form::Write(master, copy, count);
                       });
}

ExpertWeights ShardedModel::ExpertFormViews(const torch::Tensor& gathered) const {
  return expert_form::Views(gathered, block_comm_->size(), mesh_.per_rank(), spec_.expert_hidden,
                            spec_.hidden);
}

void ShardedModel::StartExpertReduce(int layer, torch::Tensor gate_up, torch::Tensor down) {
  const int64_t f = spec_.expert_hidden, h = spec_.hidden, nb = mesh_.per_block();
  // Unused weights still take part (as in ReduceWhenReady): a zero gradient.
  const auto zeros = [&](std::vector<int64_t> shape) {
    return torch::zeros(shape, torch::TensorOptions(device_).dtype(compute_dtype_));
  };
  if (!gate_up.defined()) gate_up = zeros({nb, 2 * f, h});
  if (!down.defined()) down = zeros({nb, h, f});
  torch::NoGradGuard no_grad;
  if (DirectGrads()) {
    expert_form::AddTo(experts_[layer].grad, gate_up.contiguous().view(-1),
                       down.contiguous().view(-1), mesh_.per_rank());
    return;
  }
  // The owners' reduction takes the block as gathered: [owners][gate_up, down].
  const int64_t owners = block_comm_->size();
  StartReduce(layer + 1, /*experts=*/true,
              torch::cat({gate_up.reshape({owners, -1}), down.reshape({owners, -1})}, 1).view(-1));
}

bool ShardedModel::ExpertWgradFused() const {
  return ExpertsInComputeForm() && DirectGrads() && mesh_.ep == 1 &&
         ExpertWgradAvailable(device_, compute_dtype_);
}

WgradTarget ShardedModel::ExpertGradPart(int layer, int part) {
  TORCH_CHECK(part >= 0 && part < 3, "ExpertGradPart: part 0, 1 or 2, got ", part);
  ExpertShard& e = experts_[layer];
  const int64_t f = spec_.expert_hidden, h = spec_.hidden;
  if (!e.grad.defined()) {
    e.grad =
        torch::empty({3 * e.count * f * h}, torch::TensorOptions(device_).dtype(torch::kFloat));
    e.grad_parts = 0;
  }
  const unsigned bit = 1u << part;
  const bool first = (e.grad_parts & bit) == 0;
  e.grad_parts |= bit;
  const int64_t rows = part == 2 ? h : f, cols = part == 2 ? f : h;
  return {e.grad.view({3, e.count, rows * cols})[part].view({e.count, rows, cols}), first};
}

}  // namespace trellis::train
