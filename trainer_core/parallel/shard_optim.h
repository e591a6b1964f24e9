#pragma once
// Muon and AdamW on the shards of a ShardedModel. AdamW, momentum, weight
// decay and clipping are elementwise, so each rank applies them to the
// elements it owns. Newton-Schulz needs whole matrices. Routed experts are
// owned whole (expert mesh), so their Newton-Schulz runs batched over the
// owned experts with no communication. Each dense Muon matrix has an owner rank,
// chosen once by greedy balancing of sizes. Every step one all-to-all brings
// the pieces of each matrix's update to its owner, the owner orthogonalizes
// it, and a second all-to-all returns the pieces. We chose owners over
// "everyone gathers every matrix": per rank that moves about 2/world of the
// Muon parameters instead of all of them, and Newton-Schulz runs once per
// matrix instead of once per rank.
//
// State, as flat buffers aligned with each block's shard (so a checkpoint
// reshards by concatenating and re-splitting): moment1 holds Muon momentum or
// AdamW's first moment (disjoint parameters), moment2 AdamW's second moment.

#include <vector>

#include "trainer_core/optim/optim.h"
#include "trainer_core/parallel/fsdp.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

class ShardedOptimizer {
 public:
  ShardedOptimizer(ShardedModel* model, MuonOptions muon, AdamWOptions adamw);

  // Both first finish the model's gradient reductions still in flight.
  // Global L2 norm of the gradients (one scalar all-reduce), fp64 [1] on the
  // device; scales the gradients to max_norm when above it (0: never). Never
  // waits for the device: the clip factor min(1, max_norm / norm) is applied
  // there (exactly 1 when under the limit; a pass over the gradients). With
  // the clip_in_momentum fusion the expert gradients that Muon's fused
  // momentum reads are left unscaled: the next Step applies the factor as it
  // reads them, so call Step before anything else reads them.
  torch::Tensor ClipGradNorm(double max_norm);
  void Step(double muon_lr, double adamw_lr);
  // "moment1.<block>", "moment2.<block>" (this rank's shard),
  // "moment1.experts.<layer block>", "adamw.step".
  NamedTensors State();

 private:
  // A parameter's elements inside this rank's shard of a block.
  struct Piece {
    size_t block;
    const ParamInfo* param;
    int64_t local;  // offset in the shard
    int64_t len;
    int64_t in_param;  // offset in the parameter
  };
  struct Unit {  // a Muon matrix (or stack) and its owner
    size_t block;
    const ParamInfo* param;
    int owner;
  };
  // The part of unit u that rank r owns: [offset in unit, length].
  std::pair<int64_t, int64_t> Span(const Unit& u, int rank) const;
  void MuonStep(double lr);
  void ExpertMuonStep(double lr);
  // Whether expert shard e's clip factor is left to its momentum pass.
  static bool ClipsInMomentum(const ExpertShard& e);
  void AdamWStep(double lr);

  ShardedModel* model_;
  Comm* comm_;
  MuonOptions muon_;
  AdamWOptions adamw_;
  std::vector<Piece> adamw_pieces_, muon_pieces_;
  std::vector<Unit> units_;
  std::vector<torch::Tensor> moment1_, moment2_;  // per block, [shard size]
  std::vector<torch::Tensor> expert_momentum_;    // per layer, like ExpertShard::value
  torch::Tensor step_;                            // int64 [1]
  // The clip factor (fp32 [1], device) that ExpertMuonStep still owes the
  // expert gradients that ClipsInMomentum; undefined when none is owed.
  torch::Tensor expert_clip_factor_;
};

}  // namespace trellis::train
