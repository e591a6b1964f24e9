#include "trainer_core/model/loss.h"

#include <algorithm>

namespace trellis::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The softmax's dtype, as the plain path's .to(float) (fp64 stays fp64).
torch::Dtype AccDtype(const torch::Tensor& x) {
  return x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// The summed loss over chunks of rows. When grad_x / grad_w are defined, each
// chunk also writes its rows of grad_x and adds its share to grad_w.
torch::Tensor ChunkedLoss(const torch::Tensor& x, const torch::Tensor& weight,
                          const torch::Tensor& targets, int64_t chunk_rows,
                          const torch::Tensor& grad_x, const torch::Tensor& grad_w) {
  const torch::Dtype acc = AccDtype(x);
  const int64_t n = x.size(0);
  auto loss = torch::zeros({}, x.options().dtype(acc));
  for (int64_t start = 0; start < n; start += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, n - start);
    const auto xc = x.narrow(0, start, rows);
    const auto tc = targets.narrow(0, start, rows);
    auto logits = torch::mm(xc, weight.t()).to(acc);
    const auto lse = logits.logsumexp(1);
    const auto ignored = tc.eq(-1);
    // -1 read as class 0 keeps gather in range; those rows are masked out.
    const auto safe = tc.clamp_min(0).unsqueeze(1);
    // masked_fill, not a multiply: an ignored row may hold inf or NaN.
    loss.add_((lse - logits.gather(1, safe).squeeze(1)).masked_fill_(ignored, 0).sum());
    if (!grad_x.defined() && !grad_w.defined()) continue;

    // softmax - onehot(target), in place over the logits; ignored rows zero.
    auto g = logits.sub_(lse.unsqueeze(1)).exp_().masked_fill_(ignored.unsqueeze(1), 0);
    g.scatter_add_(1, safe, ignored.logical_not().to(acc).neg().unsqueeze(1));
    g = g.to(x.scalar_type());  // what autograd of the plain path's .to(float) hands back
    if (grad_x.defined()) {
      auto rows_out = grad_x.narrow(0, start, rows);
      torch::mm_out(rows_out, g, weight);
    }
    if (!grad_w.defined()) continue;
    if (g.scalar_type() == grad_w.scalar_type())
      grad_w.addmm_(g.t(), xc);
    else
      grad_w.add_(torch::mm(g.t(), xc));  // bf16 GEMM, summed over chunks in fp32
  }
  return loss;
}

class LinearCrossEntropyFn : public torch::autograd::Function<LinearCrossEntropyFn> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& targets,
                               int64_t chunk_rows) {
    torch::Tensor grad_x, grad_w;
    if (x.requires_grad()) grad_x = torch::empty(x.sizes(), x.options());
    if (weight.requires_grad())
      grad_w = torch::zeros(weight.sizes(), weight.options().dtype(AccDtype(x)));
    auto loss = ChunkedLoss(x, weight, targets, chunk_rows, grad_x, grad_w);
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
    return {grad_x, grad_w, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor LinearCrossEntropySum(const torch::Tensor& x, const torch::Tensor& weight,
                                    const torch::Tensor& targets, int64_t chunk_rows) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1),
              "LinearCrossEntropySum: x [N, H] and weight [V, H] expected, got ", x.sizes(),
              " and ", weight.sizes());
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == x.size(0),
              "LinearCrossEntropySum: targets [N] expected, got ", targets.sizes());
  TORCH_CHECK(x.scalar_type() == weight.scalar_type(),
              "LinearCrossEntropySum: x and weight differ in dtype");
  TORCH_CHECK(chunk_rows >= 1, "LinearCrossEntropySum: chunk_rows must be >= 1");
  if (torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad()))
    return LinearCrossEntropyFn::apply(x, weight, targets, chunk_rows);
  torch::NoGradGuard no_grad;
  return ChunkedLoss(x, weight, targets, chunk_rows, {}, {});
}

int64_t CrossEntropyChunkRows(int64_t vocab) {
  constexpr int64_t kChunkBytes = int64_t{256} << 20;
  const int64_t rows = kChunkBytes / (std::max<int64_t>(vocab, 1) * 4);
  // Whole 128-row tiles for the grad_W GEMM, whose inner dimension is the rows.
  return rows >= 128 ? rows / 128 * 128 : std::max<int64_t>(rows, 1);
}

}  // namespace trellis::train
