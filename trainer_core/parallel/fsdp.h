#pragma once
// Dense FSDP: every block's dense part (layout.h: the whole block but a
// layer's routed experts) padded to a multiple of the world size and split
// evenly, rank r owning elements [r s, (r + 1) s). Routed experts follow the
// expert mesh (expert_parallel.h): each rank owns whole experts. A
// block's buffer is all-gathered right before it runs and dropped after;
// layers run under LayerFn, which keeps only the layer input and gathers and
// recomputes the layer in backward (activation checkpointing), then sends the
// layer's gradient to the owners (ReduceScatter, bf16 or fp32 on the wire).
// Embedding and head stay gathered from forward to the end of backward (they
// are used once each, at the ends of the graph).

#include <torch/torch.h>

#include <vector>

#include "trainer_core/compat.h"
#include "trainer_core/model/model.h"
#include "trainer_core/parallel/comm.h"
#include "trainer_core/parallel/expert_gather.h"
#include "trainer_core/parallel/expert_parallel.h"

namespace trellis::train {

// One block's shard on this rank.
struct BlockShard {
  const BlockLayout* layout = nullptr;
  int64_t numel = 0;   // the dense part: DenseNumel(*layout)
  int64_t padded = 0;  // world * size
  int64_t begin = 0;   // first element owned, in the block's buffer
  int64_t size = 0;
  torch::Tensor value;  // fp32 [size] master weights (zero in the padding)
  torch::Tensor grad;   // fp32 [size] gradient summed over ranks
};

// A layer's routed experts owned by this rank: experts [first, first + count)
// of w_gate, w_up and w_down, stored as [3][count][F * H] (gate, up, down).
struct ExpertShard {
  int64_t first = 0, count = 0;
  torch::Tensor value;  // fp32
  torch::Tensor grad;
};

struct ShardedForward {
  // This forward's cross entropy over `global_targets` (the global batch's
  // mean when the forward has all of it; micro-batches' add up to it): fp64
  // [1] on the device, summed over ranks there (reading it is the caller's
  // host synchronization).
  torch::Tensor ce;
  // fp64 [1] on the device: layers whose recompute routed differently from
  // their forward (must read 0; the caller checks it with the step's figures).
  torch::Tensor routing_changed;
  std::vector<torch::Tensor> expert_counts;  // per layer, over all ranks
};

class ShardedModel {
 public:
  // activation_checkpointing: layers run under LayerFn (keep the input,
  // recompute in backward); false keeps every layer's activations and
  // gathered weights until backward, and reduces the gradients after it.
  ShardedModel(const spec::ModelSpec& spec, int64_t max_seq_len, uint64_t seed, Comm* comm,
               const ExpertMesh& mesh, torch::Device device, Wire wire,
               bool activation_checkpointing = true,
               const std::string& expert_gather_dtype = "float32");

  // Forward and backward over this rank's rows; gradients are added to the
  // shards' grad (summed over ranks), so calls after one ZeroGrad accumulate
  // (micro-batches). `global_targets` counts the positions with a target over
  // all ranks' rows of the whole step (the cross entropy's denominator),
  // `global_tokens` all positions of this forward over all ranks (the
  // balance loss's). Marks `laps` (if given) between forward and backward.
  // Waits for nothing on the device except the expert all-to-all's split
  // sizes (EP > 1).
  ShardedForward ForwardBackward(const TokenBatch& local, int64_t global_targets,
                                 int64_t global_tokens, torch::Dtype compute_dtype,
                                 double aux_coef, compat::StepLaps* laps = nullptr);

  std::vector<BlockShard>& shards() { return shards_; }
  std::vector<ExpertShard>& experts() { return experts_; }  // per layer
  const ExpertMesh& mesh() const { return mesh_; }
  std::vector<torch::Tensor>& router_bias() { return router_bias_; }
  const spec::ModelSpec& spec() const { return spec_; }
  Comm& comm() { return *comm_; }
  int64_t NumParams() const;
  void ZeroGrad();
  void UpdateRouterBias(const std::vector<torch::Tensor>& counts, double rate);

  // Used by LayerFn. A layer's gathered weights: its dense part and its
  // expert block.
  struct LayerWeights {
    torch::Tensor dense, experts;
  };
  // At world 1 a "gather" is the shard itself (no copy). Leaves require grad;
  // with direct gradients (DirectGrads) a leaf's .grad is the shard's
  // gradient buffer, so backward accumulates into it and the Reduce calls
  // have nothing left to do.
  torch::Tensor Gather(size_t block);
  torch::Tensor GatherLeaf(size_t block);
  LayerWeights GatherLayer(int layer);
  LayerWeights GatherLayerLeaves(int layer);
  void ReduceLeafGrad(size_t block, const torch::Tensor& leaf);
  void ReduceLayerGrads(int layer, const LayerWeights& w);
  LayerOutput RunLayer(int layer, const LayerWeights& w, const torch::Tensor& x, bool recompute);

 private:
  spec::ModelSpec spec_;
  Comm* comm_;
  ExpertMesh mesh_;
  std::unique_ptr<Comm> ep_comm_, block_comm_;  // EP group; owners of this rank's expert block
  torch::Device device_;
  Wire wire_;
  ExpertGather expert_gather_ = ExpertGather::kFp32;
  std::vector<BlockLayout> layout_;
  std::vector<BlockShard> shards_;
  std::vector<ExpertShard> experts_;
  std::vector<torch::Tensor> router_bias_;
  RopeCache rope_;
  // Per step: what every layer's forward and recompute share.
  torch::Dtype compute_dtype_ = torch::kFloat;
  torch::Tensor mask_;
  int64_t global_tokens_ = 0;
  std::vector<torch::Tensor> counts_;  // global expert counts from forward, reused by recompute
  std::vector<EpSplits> ep_splits_;     // per layer: the dispatch split, likewise
  torch::Tensor routing_changed_;
  bool checkpointing_ = true;

  // World 1, where the wire would not change the gradient: fp32 on the wire,
  // or bf16 compute (each weight's gradient is an upcast bf16 value, which
  // the bf16 wire rounds to itself).
  bool DirectGrads() const;
  torch::Tensor Leaf(const torch::Tensor& value, const torch::Tensor& grad);
};

}  // namespace trellis::train
