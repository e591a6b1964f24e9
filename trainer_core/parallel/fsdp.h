#pragma once
// Dense FSDP: every block's flat buffer (layout.h) padded to a multiple of the
// world size and split evenly, rank r owning elements [r s, (r + 1) s). A
// block's buffer is all-gathered right before it runs and dropped after;
// layers run under LayerFn, which keeps only the layer input and gathers and
// recomputes the layer in backward (activation checkpointing), then sends the
// layer's gradient to the owners (ReduceScatter, bf16 or fp32 on the wire).
// Embedding and head stay gathered from forward to the end of backward (they
// are used once each, at the ends of the graph).

#include <torch/torch.h>

#include <vector>

#include "trainer_core/model/model.h"
#include "trainer_core/parallel/comm.h"

namespace trellis::train {

// One block's shard on this rank.
struct BlockShard {
  const BlockLayout *layout = nullptr;
  int64_t padded = 0; // world * size
  int64_t begin = 0;  // first element owned, in the block's buffer
  int64_t size = 0;
  torch::Tensor value; // fp32 [size] master weights (zero in the padding)
  torch::Tensor grad;  // fp32 [size] gradient summed over ranks
};

struct ShardedForward {
  double ce = 0;  // mean cross entropy over the global batch
  double aux = 0; // balance loss over the global batch, mean over layers
  std::vector<torch::Tensor> expert_counts; // per layer, over all ranks
};

class ShardedModel {
public:
  ShardedModel(const spec::ModelSpec &spec, int64_t max_seq_len, uint64_t seed,
               Comm *comm, torch::Device device, Wire wire);

  // Forward and backward over this rank's rows; gradients end up in the
  // shards' grad (summed over ranks). `global_targets` counts the positions
  // with a target over all ranks' rows, `global_tokens` all positions.
  ShardedForward ForwardBackward(const TokenBatch &local,
                                 int64_t global_targets, int64_t global_tokens,
                                 torch::Dtype compute_dtype, double aux_coef);

  std::vector<BlockShard> &shards() { return shards_; }
  std::vector<torch::Tensor> &router_bias() { return router_bias_; }
  const spec::ModelSpec &spec() const { return spec_; }
  Comm &comm() { return *comm_; }
  int64_t NumParams() const;
  void ZeroGrad();
  void UpdateRouterBias(const std::vector<torch::Tensor> &counts, double rate);

  // Used by LayerFn.
  torch::Tensor Gather(size_t block);
  void ReduceGrad(size_t block, const torch::Tensor &full_grad);
  LayerOutput RunLayer(int layer, const torch::Tensor &full,
                       const torch::Tensor &x, bool recompute);

private:
  spec::ModelSpec spec_;
  Comm *comm_;
  torch::Device device_;
  Wire wire_;
  std::vector<BlockLayout> layout_;
  std::vector<BlockShard> shards_;
  std::vector<torch::Tensor> router_bias_;
  RopeCache rope_;
  // Per step: what every layer's forward and recompute share.
  torch::Dtype compute_dtype_ = torch::kFloat;
  torch::Tensor mask_;
  int64_t global_tokens_ = 0;
  std::vector<torch::Tensor>
      counts_; // global expert counts from forward, reused by recompute
};

} // namespace trellis::train
