#include "trainer_core/parallel/expert_form.h"

#ifdef TRELLIS_WITH_KERNELS
#include "kernels/accumulate.h"
#include "trainer_core/model/kernel_args.h"
#endif

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

#ifdef TRELLIS_WITH_KERNELS
namespace {

// ATen's add of a strided operand runs its generic elementwise loop (at about
// half the memory bandwidth); kernels/accumulate walks the rows in 16-byte
// words, one launch per part, with the same fp32 add.
bool AddToKernel(torch::Tensor& into, const torch::Tensor& gate_up, const torch::Tensor& down,
                 int64_t count, int64_t fh, bool first) {
  for (const auto* t : {&gate_up, &down})
    if (!t->is_cuda() || t->scalar_type() != torch::kBFloat16 || !t->is_contiguous()) return false;
  float* acc = into.data_ptr<float>();
  const auto stream = CurrentStream();
  for (int part = 0; part < 2; ++part)  // rows of FH, 2 FH apart
    kernels::AccumulateBf16Rows(acc + part * count * fh, Bf16(gate_up) + part * fh, count, fh,
                                2 * fh, first, stream);
  kernels::AccumulateBf16Rows(acc + 2 * count * fh, Bf16(down), 1, count * fh, count * fh, first,
                              stream);
  return true;
}

}  // namespace
#endif

void AddTo(torch::Tensor& into, const torch::Tensor& gate_up, const torch::Tensor& down,
           int64_t count) {
  TORCH_CHECK(count > 0 && gate_up.dim() == 1 && down.dim() == 1 &&
                  gate_up.numel() == 2 * down.numel() && down.numel() % count == 0,
              "expert_form::AddTo: gate_up of 2 x ", count, " matrices and down of ", count,
              ", got ", gate_up.sizes(), " and ", down.sizes());
  const int64_t fh = down.numel() / count;
  torch::NoGradGuard no_grad;
  const bool first = !into.defined();
  if (first) into = torch::empty({3 * count * fh}, down.options().dtype(torch::kFloat));
#ifdef TRELLIS_WITH_KERNELS
  if (AddToKernel(into, gate_up, down, count, fh, first)) return;
#endif
  auto parts = into.view({3, count, fh});
  auto by_part = gate_up.view({count, 2, fh}).transpose(0, 1);
  if (first) {
    parts.narrow(0, 0, 2).copy_(by_part);
    parts[2].copy_(down.view({count, fh}));
  } else {
    parts.narrow(0, 0, 2).add_(by_part);
    parts[2].add_(down.view({count, fh}));
  }
}

void AddTo(torch::Tensor& into, const torch::Tensor& grad, int64_t count) {
  const int64_t fh = MatrixNumel(grad, count);
  AddTo(into, grad.narrow(0, 0, 2 * count * fh), grad.narrow(0, 2 * count * fh, count * fh),
        count);
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
