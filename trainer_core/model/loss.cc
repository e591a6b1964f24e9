#include "trainer_core/model/loss.h"

#include <algorithm>

#include "trainer_core/compat.h"
#include "trainer_core/model/fusions.h"

#ifdef TRELLIS_WITH_KERNELS
#include "kernels/cross_entropy.h"
#include "trainer_core/model/kernel_args.h"
#endif

namespace trellis::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The softmax's dtype, as the plain path's .to(float) (fp64 stays fp64).
torch::Dtype AccDtype(const torch::Tensor& x) {
  return x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// grad_w += g^T x. bf16 GEMMs summed over chunks in fp32: into grad_w by the
// GEMM itself where LibTorch has one for it, else a bf16 product added.
void AddGradW(const torch::Tensor& grad_w, const torch::Tensor& g, const torch::Tensor& x) {
  if (g.scalar_type() == grad_w.scalar_type())
    grad_w.addmm_(g.t(), x);
  else if (!compat::AddMmIntoFp32(grad_w, g.t(), x))
    grad_w.add_(torch::mm(g.t(), x));
}

// A chunk's loss and gradient by kernels/cross_entropy (the ce_kernel fusion):
// the gradient softmax - onehot written over the bf16 logits, zero on ignored
// rows; the chunk's summed loss added to `loss`. False (nothing done) where
// the kernel does not apply.
bool KernelChunk(bool ce_kernel, const torch::Tensor& logits, const torch::Tensor& targets,
                 bool with_grad, torch::Tensor& loss) {
#ifdef TRELLIS_WITH_KERNELS
  if (!ce_kernel || !logits.is_cuda() ||
      logits.scalar_type() != torch::kBFloat16 || !logits.is_contiguous())
    return false;
  const auto t = targets.contiguous();
  auto rows = torch::empty({logits.size(0)}, logits.options().dtype(torch::kFloat));
  kernels::CrossEntropyRows(Bf16(logits), logits.size(0), logits.size(1), logits.size(1),
                            t.data_ptr<int64_t>(), rows.data_ptr<float>(),
                            with_grad ? Bf16(logits) : nullptr, CurrentStream());
  loss.add_(rows.sum());
  return true;
#else
  (void)ce_kernel, (void)logits, (void)targets, (void)with_grad, (void)loss;
  return false;
#endif
}

// The summed loss over chunks of rows. When grad_x / grad_w are defined, each
// chunk also writes its rows of grad_x and adds its share to grad_w.
torch::Tensor ChunkedLoss(const torch::Tensor& x, const torch::Tensor& weight,
                          const torch::Tensor& targets, int64_t chunk_rows, bool ce_kernel,
                          const torch::Tensor& grad_x, const torch::Tensor& grad_w) {
  const torch::Dtype acc = AccDtype(x);
  const int64_t n = x.size(0);
  auto loss = torch::zeros({}, x.options().dtype(acc));
  for (int64_t start = 0; start < n; start += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, n - start);
    const auto xc = x.narrow(0, start, rows);
    const auto tc = targets.narrow(0, start, rows);
    const bool with_grad = grad_x.defined() || grad_w.defined();
    auto logits = torch::mm(xc, weight.t());
    if (KernelChunk(ce_kernel, logits, tc, with_grad, loss)) {
      if (!with_grad) continue;
      // Ignored rows' gradient is zero: no mask on either GEMM.
      if (grad_x.defined()) {
        auto rows_out = grad_x.narrow(0, start, rows);
        torch::mm_out(rows_out, logits, weight);
      }
      if (grad_w.defined()) AddGradW(grad_w, logits, xc);
      continue;
    }
    // log-softmax in `acc` straight from the logits: one pass, no cast copy.
    const auto logp = torch::log_softmax(logits, 1, acc);
    const auto ignored = tc.eq(-1);
    // -1 read as class 0 keeps gather in range; those rows are masked out.
    const auto safe = tc.clamp_min(0).unsqueeze(1);
    const auto target_logp = logp.gather(1, safe).squeeze(1);
    loss.sub_(target_logp.masked_fill(ignored, 0).sum());
    if (!with_grad) continue;

    // softmax - onehot(target) in x's dtype, every element rounded once from
    // `acc` (what autograd of the plain path's .to(float) hands back): the
    // softmax written straight in x's dtype, then the target column as p - 1.
    auto g = torch::empty(logp.sizes(), x.options());
    at::exp_out(g, logp);
    g.scatter_(1, safe, (target_logp.exp() - 1).unsqueeze(1).to(g.scalar_type()));
    // Ignored rows contribute nothing: zero their [rows, H] sides (x's rows
    // and grad_x's) rather than g's [rows, vocab].
    const auto keep = ignored.logical_not().unsqueeze(1).to(x.scalar_type());
    if (grad_x.defined()) {
      auto rows_out = grad_x.narrow(0, start, rows);
      torch::mm_out(rows_out, g, weight);
      rows_out.mul_(keep);
    }
    if (!grad_w.defined()) continue;
    AddGradW(grad_w, g, xc * keep);
  }
  return loss;
}

class LinearCrossEntropyFn : public torch::autograd::Function<LinearCrossEntropyFn> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& targets,
                               int64_t chunk_rows, bool ce_kernel) {
    torch::Tensor grad_x, grad_w;
    if (x.requires_grad()) grad_x = torch::empty(x.sizes(), x.options());
    if (weight.requires_grad())
      grad_w = torch::zeros(weight.sizes(), weight.options().dtype(AccDtype(x)));
    auto loss = ChunkedLoss(x, weight, targets, chunk_rows, ce_kernel, grad_x, grad_w);
    // Saved as variables, not saved_data: autograd frees them after backward.
    ctx->save_for_backward({grad_x, grad_w});
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& scale = grads[0];  // 0-dim: the product keeps grad_x's dtype
    torch::Tensor grad_x, grad_w;
    if (saved[0].defined()) grad_x = saved[0] * scale;
    if (saved[1].defined())
      grad_w = (saved[1] * scale).to(ctx->saved_data["weight_dtype"].toScalarType());
    return {grad_x, grad_w, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor LinearCrossEntropySum(const torch::Tensor& x, const torch::Tensor& weight,
                                    const torch::Tensor& targets, int64_t chunk_rows,
                                    const Fusions& fusions) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1),
              "LinearCrossEntropySum: x [N, H] and weight [V, H] expected, got ", x.sizes(),
              " and ", weight.sizes());
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == x.size(0),
              "LinearCrossEntropySum: targets [N] expected, got ", targets.sizes());
  TORCH_CHECK(x.scalar_type() == weight.scalar_type(),
              "LinearCrossEntropySum: x and weight differ in dtype");
  TORCH_CHECK(chunk_rows >= 1, "LinearCrossEntropySum: chunk_rows must be >= 1");
  if (torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad()))
    return LinearCrossEntropyFn::apply(x, weight, targets, chunk_rows, fusions.ce_kernel);
  torch::NoGradGuard no_grad;
  return ChunkedLoss(x, weight, targets, chunk_rows, fusions.ce_kernel, {}, {});
}

int64_t CrossEntropyChunkRows(int64_t vocab) {
  constexpr int64_t kChunkBytes = int64_t{256} << 20;
  const int64_t rows = kChunkBytes / (std::max<int64_t>(vocab, 1) * 4);
  // Whole 128-row tiles for the grad_W GEMM, whose inner dimension is the rows.
  return rows >= 128 ? rows / 128 * 128 : std::max<int64_t>(rows, 1);
}

}  // namespace trellis::train
