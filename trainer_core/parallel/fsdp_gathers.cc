// ShardedModel's weight gathers: the step's order of blocks (embedding,
// layers, head, then the layers again where backward recomputes them), each
// started `prefetch_` blocks ahead of its use and taken in that order.
#include "trainer_core/parallel/expert_gather.h"
#include "trainer_core/parallel/fsdp.h"

namespace trellis::train {
namespace {

// Every rank's `shard` end to end: [comm.size() * shard.numel()], in its dtype.
PendingTensor StartGatherShards(Comm& comm, const torch::Tensor& shard) {
  if (comm.size() == 1) return PendingTensor(shard);
  auto full = torch::empty({shard.numel() * comm.size()}, shard.options());
  std::vector<std::unique_ptr<CommWork>> works;
  works.push_back(comm.StartAllGather(shard, full));
  return PendingTensor(std::move(works), [full] { return full; });
}

}  // namespace

torch::Tensor ShardedModel::GatherSource(BlockShard& s) {
  return CopiesInUse() ? s.compute.Get(s.value, compute_dtype_) : s.value.detach();
}

void ShardedModel::PlanGathers() {
  const size_t layers = static_cast<size_t>(spec_.layers);
  gather_order_.clear();
  for (size_t b = 0; b <= layers + 1; ++b) gather_order_.push_back(b);  // embed, layers, head
  if (checkpointing_)
    for (size_t b = layers; b >= 1; --b) gather_order_.push_back(b);  // the recomputes
  gathers_.clear();
  started_ = taken_ = 0;
}

void ShardedModel::StartGather(size_t block) {
  BlockShard& s = shards_[block];
  InFlight g{block, {}, {}};
  g.dense = StartGatherShards(*dense_, GatherSource(s));
  if (block >= 1 && block <= experts_.size()) {
    ExpertShard& e = experts_[block - 1];
    // fp8 on the wire encodes the fp32 master; fp32 and bf16 wires carry the
    // bf16 copy when copies are on (the values compute rounds to anyway).
    if (CopiesInUse() && expert_gather_ != ExpertGather::kFp8) {
      g.experts = StartGatherShards(*block_comm_, ExpertCopy(e));
    } else {
      g.experts = block_comm_->size() == 1
                      ? PendingTensor(e.value.detach())
                      : StartGatherExperts(*block_comm_, e.value, expert_gather_);
    }
  }
  gathers_.push_back(std::move(g));
}

ShardedModel::LayerWeights ShardedModel::Take(size_t block) {
  TORCH_CHECK(taken_ < gather_order_.size() && gather_order_[taken_] == block,
              "fsdp: block ", block, " taken out of the step's gather order");
  // This block's gather and the next prefetch_ are on their way.
  while (started_ < gather_order_.size() && started_ <= taken_ + prefetch_)
    StartGather(gather_order_[started_++]);
  InFlight g = std::move(gathers_.front());
  gathers_.pop_front();
  ++taken_;
  LayerWeights w{g.dense.Finish(), torch::Tensor()};
  if (g.experts.valid()) w.experts = g.experts.Finish();
  return w;
}

ShardedModel::LayerWeights ShardedModel::TakeLayer(int layer) { return Take(layer + 1); }

ShardedModel::LayerWeights ShardedModel::TakeLayerLeaves(int layer) {
  LayerWeights w = TakeLayer(layer);
  return {Leaf(w.dense, shards_[layer + 1].grad), Leaf(w.experts, experts_[layer].grad)};
}

}  // namespace trellis::train
