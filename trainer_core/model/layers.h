#pragma once
// The model's layers as free functions of (activations, weights): the weights
// are views that the caller builds (out of a block's flat buffer), so the same
// code runs on a whole model or on a gathered shard.

#include <functional>

#include "trainer_core/model/fusions.h"
#include "trainer_core/model/rms_norm_op.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

// cos/sin tables [max_len, head_dim / 2], built once and shared by all layers.
struct RopeCache {
  torch::Tensor cos, sin;
};
RopeCache BuildRope(int64_t max_len, int64_t head_dim, double theta, torch::Device device,
                    torch::Dtype dtype);

// [B, 1, T, T] boolean: position i may attend to j when j <= i and both lie in
// the same document of the packed row. Undefined doc_ids (every row is one
// document) give an undefined mask: plain causal attention.
torch::Tensor DocumentCausalMask(const torch::Tensor& doc_ids);

struct AttentionWeights {
  torch::Tensor wq, wk, wv, wo;  // [out, in]
  int64_t heads = 0, kv_heads = 0;
};
// x: [B, T, H]. Grouped-query attention with RoPE on q and k; `mask` as
// DocumentCausalMask returns it (undefined: causal). `fusions` picks the
// sdpa_gqa path (tests compare both in one process).
torch::Tensor AttentionForward(const torch::Tensor& x, const AttentionWeights& w,
                               const RopeCache& rope, const torch::Tensor& mask,
                               const Fusions& fusions = ActiveFusions());

// Runs routed experts on token slots grouped by expert (counts[e] rows for
// expert e, in expert order) and returns their outputs in the same order.
using ExpertRunner =
    std::function<torch::Tensor(const torch::Tensor& xs, const torch::Tensor& counts)>;

// Where one part of the experts' weight gradient accumulates in fp32: acc
// is [E, rows, cols] contiguous (gate and up [E, F, H], down [E, H, F]);
// `first`: the step's first contribution, written rather than added.
struct WgradTarget {
  torch::Tensor acc;
  bool first = false;
};

// A layer's routed experts, stacked [E, ...]: gate and up as two tensors, or
// side by side in one (each expert's gate rows, then its up rows), which one
// GEMM multiplies (the gate_up_gemm fusion, model/fusions.h).
struct ExpertWeights {
  torch::Tensor gate, up;  // [E, F, H] each; undefined when gate_up is set
  torch::Tensor gate_up;   // [E, 2F, H], or undefined
  torch::Tensor down;      // [E, H, F]
  // The expert_wgrad fusion (model/expert_wgrad_op.h): when set, backward sums
  // the weight gradients into wgrad_into(part) (0 gate, 1 up, 2 down) itself
  // and autograd gets none for gate_up and down. Needs gate_up.
  std::function<WgradTarget(int part)> wgrad_into;
};

// The plain runner: all experts local.
torch::Tensor RunLocalExperts(const torch::Tensor& xs, const torch::Tensor& counts,
                              const ExpertWeights& w);

struct MoeWeights {
  torch::Tensor router;                               // [E, H]
  torch::Tensor router_bias;                          // [E]; steers selection only, never the gates
  ExpertWeights experts;
  torch::Tensor shared_gate, shared_up, shared_down;  // undefined without a shared expert
  int64_t top_k = 1;
  // Group-limited routing: top_k / groups experts from each of `groups`
  // groups of consecutive experts (model.expert_groups); 1: plain top-k.
  int64_t groups = 1;
  // Sharded runs: local counts -> counts over all ranks (unset: the local
  // counts), and the number of tokens over all ranks (0: this call's). The
  // balance loss is then this rank's share of the global one.
  std::function<torch::Tensor(const torch::Tensor&)> global_counts;
  int64_t total_tokens = 0;
  // Expert parallelism: when set, runs the experts (`experts` is
  // then unused), e.g. by sending the slots to the ranks that hold them.
  ExpertRunner run_experts;
};
struct MoeResult {
  torch::Tensor y;       // [N, H]
  torch::Tensor aux;     // scalar load-balancing loss, 1.0 at perfect balance
  torch::Tensor counts;  // [E] int64: tokens routed to each expert (over all ranks)
};
// The experts each token is routed to, [N, k], from its selection scores
// [N, E]: the k highest (groups 1), or the k / groups highest of each group
// of E / groups consecutive experts.
torch::Tensor ChooseExperts(const torch::Tensor& scores, int64_t k, int64_t groups);

// x: [N, H] tokens.
MoeResult MoeForward(const torch::Tensor& x, const MoeWeights& w);

}  // namespace trellis::train
