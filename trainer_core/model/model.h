#pragma once
// The decoder-only MoE transformer. Parameters live in one flat buffer per
// block (common/model_layout/model_layout.h); Forward builds the weights as
// views of those buffers, so gradients land contiguous per block.

#include <vector>

#include "common/model_layout/model_layout.h"
#include "common/spec/trainer_spec.h"
#include "trainer_core/model/fusions.h"
#include "trainer_core/model/layers.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

struct TokenBatch {
  torch::Tensor inputs;   // [B, T] int64
  torch::Tensor targets;  // [B, T] int64; -1 where there is nothing to predict
  // [B, T] int64; equal within one document of a row. Undefined when every
  // row is a single document: attention is then plainly causal (flash).
  torch::Tensor doc_ids;
};

struct ForwardResult {
  torch::Tensor loss;  // ce + aux_coef * aux: what backward runs on
  torch::Tensor ce;    // mean cross entropy over positions with a target, nats
  torch::Tensor aux;   // load-balancing loss averaged over layers
  std::vector<torch::Tensor> expert_counts;  // per layer, [experts]
};

// A block's parameters: one leaf tensor that requires grad; its .grad() is
// allocated once and zeroed in place, so views of it stay valid.
struct Block {
  const BlockLayout* layout;
  torch::Tensor flat;
};

class Model {
 public:
  Model(const spec::ModelSpec& spec, int64_t max_seq_len, uint64_t seed, torch::Device device,
        torch::Dtype param_dtype);

  // The head's loss chunked or not as `fusions.chunked_ce` says; the overload
  // without it takes this process's ActiveFusions().
  ForwardResult Forward(const TokenBatch& batch, torch::Dtype compute_dtype, double aux_coef,
                        const Fusions& fusions) const;
  ForwardResult Forward(const TokenBatch& batch, torch::Dtype compute_dtype, double aux_coef) const;

  std::vector<Block>& blocks() { return blocks_; }
  const std::vector<Block>& blocks() const { return blocks_; }
  // Per-layer expert selection bias (aux-loss-free balancing): state, not a
  // parameter.
  std::vector<torch::Tensor>& router_bias() { return router_bias_; }
  const spec::ModelSpec& spec() const { return spec_; }
  torch::Device device() const { return device_; }
  int64_t NumParams() const;

  void ZeroGrad();
  // Raises the bias of under-loaded experts and lowers it for over-loaded ones.
  void UpdateRouterBias(const std::vector<torch::Tensor>& counts, double rate);

 private:
  spec::ModelSpec spec_;
  torch::Device device_;
  std::vector<BlockLayout> layout_;
  std::vector<Block> blocks_;
  std::vector<torch::Tensor> router_bias_;
  RopeCache rope_;
};

// A view of one parameter (shape as in the layout) inside a block buffer.
torch::Tensor ParamView(const torch::Tensor& flat, const ParamInfo& p);

// The model's pieces as functions of a block's flat buffer (any dtype: the
// weights are converted to `compute_dtype`), shared by Model and the sharded
// model, which gathers the buffers first.
torch::Tensor EmbedForward(const BlockLayout& block, const torch::Tensor& flat,
                           const torch::Tensor& inputs, torch::Dtype compute_dtype);

// A layer's residual stream is x + pending: the MoE output is handed on
// unsummed (pending), so that the next layer adds it in the same pass as its
// first norm (AddRmsNorm; the cross_layer_norm fusion, fusions.h: off, x
// holds the sum and pending is undefined). Residual() sums it where no norm
// follows.
struct LayerOutput {
  torch::Tensor x, pending, aux, counts;  // aux, counts: see MoeResult
  torch::Tensor Residual() const { return pending.defined() ? x + pending : x; }
};
// x += pending; x += Attn(RMSNorm(x)); x += MoE(RMSNorm(x)), the last add
// left pending. `pending` may be undefined (nothing to add). `moe_reduce`
// carries the sharded run's count reduction and token total (MoeWeights
// fields).
LayerOutput LayerForward(const spec::ModelSpec& spec, const BlockLayout& block,
                         const torch::Tensor& flat, torch::Dtype compute_dtype,
                         const torch::Tensor& x, const torch::Tensor& pending,
                         const RopeCache& rope, const torch::Tensor& mask,
                         const torch::Tensor& router_bias, const MoeWeights& moe_reduce);

// Final norm, head and cross entropy summed over positions with a target
// (targets [B, T], -1 where none), in fp32 (fp64 in fp64 compute). `chunked`:
// the head and loss over chunks of rows (loss.h), never the whole logits;
// otherwise the plain logits and cross_entropy. The overload without it
// chunks as ActiveFusions().chunked_ce says.
torch::Tensor HeadCrossEntropySum(const spec::ModelSpec& spec, const BlockLayout& block,
                                  const torch::Tensor& flat, torch::Dtype compute_dtype,
                                  const torch::Tensor& x, const torch::Tensor& targets,
                                  bool chunked);
torch::Tensor HeadCrossEntropySum(const spec::ModelSpec& spec, const BlockLayout& block,
                                  const torch::Tensor& flat, torch::Dtype compute_dtype,
                                  const torch::Tensor& x, const torch::Tensor& targets);

}  // namespace trellis::train
