// The MoE feed-forward: router, top-k (plain or group-limited), SwiGLU
// experts from stacked weights, optional shared expert, load-balancing loss.
#include "trainer_core/compat.h"
#include "trainer_core/model/expert_wgrad_op.h"
#include "trainer_core/model/layers.h"
#include "trainer_core/model/moe_ops.h"
#include "trainer_core/model/swiglu_op.h"

namespace trellis::train {
namespace {

// One expert's feed-forward, [*, H] -> [*, H].
torch::Tensor SwiGluFfn(const torch::Tensor& x, const torch::Tensor& gate, const torch::Tensor& up,
                        const torch::Tensor& down) {
  auto h = SwiGlu(torch::matmul(x, gate.t()), torch::matmul(x, up.t()));
  return torch::matmul(h, down.t());
}

}  // namespace

torch::Tensor ChooseExperts(const torch::Tensor& scores, int64_t k, int64_t groups) {
  if (groups == 1) return std::get<1>(scores.topk(k, -1));
  const int64_t n = scores.size(0), e = scores.size(1);
  TORCH_CHECK(e % groups == 0 && k % groups == 0, "ChooseExperts: ", groups,
              " groups must divide the ", e, " experts and top-k ", k);
  // Top k / groups within each group, then from a group's local index to
  // the expert's: [N, groups, k / groups] + group * (e / groups).
  auto local = std::get<1>(scores.view({n, groups, e / groups}).topk(k / groups, -1));
  auto first = torch::arange(groups, local.options()).mul_(e / groups).view({1, groups, 1});
  return (local + first).view({n, k});
}

torch::Tensor RunLocalExperts(const torch::Tensor& xs, const torch::Tensor& counts,
                              const ExpertWeights& w) {
  // Gate and up as views of the side-by-side stack where it is given.
  const int64_t f = w.down.size(2);
  const auto gate = w.gate_up.defined() ? w.gate_up.narrow(1, 0, f) : w.gate;
  const auto up = w.gate_up.defined() ? w.gate_up.narrow(1, f, f) : w.up;
  if (compat::HasGroupedMm(xs)) {
    // One grouped GEMM per projection over all experts; the group ends stay
    // on the device (no per-layer counts.cpu() sync).
    auto offs = counts.cumsum(0).to(torch::kInt);
    if (w.wgrad_into) return RunExpertsSummingWgrad(xs, counts, offs, w);
    auto t = [](const torch::Tensor& m) { return m.transpose(-2, -1); };
    auto h = w.gate_up.defined()
                 ? SwiGluPacked(compat::GroupedMm(xs, t(w.gate_up), offs))
                 : SwiGlu(compat::GroupedMm(xs, t(gate), offs), compat::GroupedMm(xs, t(up), offs));
    return compat::GroupedMm(h, t(w.down), offs);
  }
  TORCH_CHECK(!w.wgrad_into, "RunLocalExperts: wgrad_into needs CUDA bf16 grouped GEMMs, got ",
              xs.scalar_type(), " on ", xs.device());
  auto counts_host = counts.cpu();
  auto c = counts_host.accessor<int64_t, 1>();
  std::vector<torch::Tensor> outs;
  int64_t start = 0;
  for (int64_t i = 0; i < counts.size(0); ++i) {
    if (c[i] == 0) continue;
    outs.push_back(SwiGluFfn(xs.narrow(0, start, c[i]), gate[i], up[i], w.down[i]));
    start += c[i];
  }
  // No slots (an EP rank whose block got no tokens): [0, H], with the
  // weights still in the graph, so that their gradient is zeros and the
  // block's reduction to its owners runs on this rank as on the others.
  if (outs.empty())
    return xs.narrow(1, 0, w.down.size(1)) * 0 + (gate.sum() + up.sum() + w.down.sum()) * 0;
  return torch::cat(outs);
}

MoeResult MoeForward(const torch::Tensor& x, const MoeWeights& w) {
  const int64_t n = x.size(0), e = w.router.size(0), k = w.top_k;
  auto acc = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  auto probs = torch::softmax(torch::matmul(x, w.router.t()).to(acc), -1);  // [N, E]

  // The bias (aux-loss-free balancing) moves tokens between experts but the
  // gates stay the router's own probabilities, renormalized over the top k.
  auto select = w.router_bias.defined() ? probs.detach() + w.router_bias.to(acc) : probs.detach();
  auto chosen = ChooseExperts(select, k, w.groups);  // [N, k]
  auto gates = probs.gather(1, chosen);
  gates = gates / gates.sum(-1, /*keepdim=*/true);

  auto flat_expert = chosen.reshape(-1);  // slot j belongs to token j / k
  // bincount's counts, without its host syncs on CUDA (it reads min and max).
  auto counts = torch::zeros({e}, flat_expert.options())
                    .scatter_add_(0, flat_expert, torch::ones_like(flat_expert));
  auto all_counts = w.global_counts ? w.global_counts(counts) : counts;
  const double total = static_cast<double>(w.total_tokens > 0 ? w.total_tokens : n);
  // Switch-style balance: E * sum_e (fraction of slots to e) * (mean prob of
  // e), both over every rank's tokens; this rank adds its tokens'
  // probabilities.
  auto aux = e * (all_counts.to(acc) / (total * k) * (probs.sum(0) / total)).sum();

  // Group the slots by expert (stable, so the order is reproducible), run each
  // expert on its contiguous group, scatter back weighted by the gates.
  auto order = std::get<1>(torch::sort(flat_expert, /*stable=*/true, /*dim=*/0,
                                       /*descending=*/false));
  auto run = [&](const torch::Tensor& xs) {
    return w.run_experts ? w.run_experts(xs, counts)
                         : RunLocalExperts(xs, counts, w.experts);
  };
  torch::Tensor y;
  if (x.is_cuda()) {
    // Gathers both ways, and each token sums its k outputs in one reduction:
    // no atomics (moe_ops.h; kernels/ where they apply).
    y = DispatchRunCombine(x, gates, order, k, run);
  } else {
    auto token_of = order.div(k, "floor");
    auto outs = run(x.index_select(0, token_of));
    auto slot_gates = gates.reshape(-1).index_select(0, order).to(x.scalar_type()).unsqueeze(1);
    y = torch::zeros_like(x).index_add(0, token_of, outs * slot_gates);
  }
  if (w.shared_gate.defined()) y = y + SwiGluFfn(x, w.shared_gate, w.shared_up, w.shared_down);
  return {y, aux, all_counts};
}

}  // namespace trellis::train
