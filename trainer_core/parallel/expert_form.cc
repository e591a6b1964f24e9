#include "trainer_core/parallel/expert_form.h"

namespace trellis::train::expert_form {
namespace {

int64_t MatrixNumel(const torch::Tensor& block, int64_t count) {
  TORCH_CHECK(count > 0 && block.dim() == 1 && block.numel() % (3 * count) == 0,
              "expert_form: a flat block of 3 x ", count, " matrices, got ", block.sizes());
  return block.numel() / (3 * count);
}

// Gate and up of a compute-form block as [2 (part), count, FH].
torch::Tensor GateUpByPart(const torch::Tensor& form, int64_t count, int64_t fh) {
  return form.narrow(0, 0, 2 * count * fh).view({count, 2, fh}).transpose(0, 1);
}

}  // namespace

torch::Tensor Part(const torch::Tensor& form, int64_t count, int part) {
  const int64_t fh = MatrixNumel(form, count);
  TORCH_CHECK(part >= 0 && part < 3, "expert_form::Part: part 0, 1 or 2, got ", part);
  if (part == 2) return form.narrow(0, 2 * count * fh, count * fh).view({count, fh});
  return GateUpByPart(form, count, fh)[part];
}

void Write(const torch::Tensor& stored, torch::Tensor& form, int64_t count) {
  const int64_t fh = MatrixNumel(stored, count);
  TORCH_CHECK(form.sizes() == stored.sizes(), "expert_form::Write: sizes differ, ",
              form.sizes(), " and ", stored.sizes());
  torch::NoGradGuard no_grad;
  auto parts = stored.view({3, count, fh});
  GateUpByPart(form, count, fh).copy_(parts.narrow(0, 0, 2));
  Part(form, count, 2).copy_(parts[2]);
}

void AddTo(torch::Tensor& into, const torch::Tensor& grad, int64_t count) {
  const int64_t fh = MatrixNumel(grad, count);
  torch::NoGradGuard no_grad;
  const bool first = !into.defined();
  if (first) into = torch::empty(grad.sizes(), grad.options().dtype(torch::kFloat));
  auto parts = into.view({3, count, fh});
  auto gate_up = parts.narrow(0, 0, 2), down = parts[2];
  if (first) {
    gate_up.copy_(GateUpByPart(grad, count, fh));
    down.copy_(Part(grad, count, 2));
  } else {
    gate_up.add_(GateUpByPart(grad, count, fh));
    down.add_(Part(grad, count, 2));
  }
}

ExpertWeights Views(const torch::Tensor& gathered, int64_t owners, int64_t count, int64_t f,
                    int64_t h) {
  const int64_t fh = f * h;
  TORCH_CHECK(gathered.numel() == owners * 3 * count * fh, "expert_form::Views: ",
              gathered.numel(), " elements for ", owners, " blocks of 3 x ", count, " x ", f,
              " x ", h);
  auto parts = gathered.view({owners, 3 * count * fh}).split_with_sizes({2 * count * fh,
                                                                         count * fh}, 1);
  ExpertWeights w;
  w.gate_up = parts[0].reshape({owners * count, 2 * f, h});
  w.down = parts[1].reshape({owners * count, h, f});
  return w;
}

}  // namespace trellis::train::expert_form
