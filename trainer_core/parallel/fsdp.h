#pragma once
// Dense FSDP: every block's dense part (model_layout.h: the whole block but a
// layer's routed experts) padded to a multiple of the world size and split
// evenly, rank r owning elements [r s, (r + 1) s). Routed experts follow the
// expert mesh (expert_parallel.h): each rank owns whole experts. A
// block's buffer is all-gathered right before it runs and dropped after;
// layers run under LayerFn, which keeps only the layer input and gathers and
// recomputes the layer in backward (activation checkpointing), then sends the
// layer's gradient to the owners (ReduceScatter, bf16 or fp32 on the wire).
// Embedding and head stay gathered from forward to the end of backward (they
// are used once each, at the ends of the graph).
//
// Overlap (prefetch_layers = P > 0): the step's gathers are used in a known
// order (embedding, layers, head, then the layers in reverse for their
// recompute), and taking one starts the next P, so a layer's weights travel
// while the layer before it computes; at most P + 1 gathered layers are
// alive. Each block's gradient reduction starts as soon as its backward is
// done and is waited for when 2P reductions are in flight or when the
// optimizer needs the shards (FinishGrads). Dense gathers and reductions
// then travel on a communicator of their own, so the small collectives a
// layer waits for (expert counts, the loss) do not queue behind them.
// P = 0: every gather and reduction waited for at once. The numbers are the
// same for every P: the same values are summed in the same order.

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "trainer_core/compat_device_time.h"
#include "trainer_core/memory/activation_offload.h"
#include "trainer_core/model/model.h"
#include "trainer_core/parallel/cast_cache.h"
#include "trainer_core/parallel/comm.h"
#include "trainer_core/parallel/expert_gather.h"
#include "trainer_core/parallel/expert_parallel.h"
#include "trainer_core/parallel/pending.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

// One block's shard on this rank.
struct BlockShard {
  const BlockLayout* layout = nullptr;
  int64_t numel = 0;   // the dense part: DenseNumel(*layout)
  int64_t padded = 0;  // world * size
  int64_t begin = 0;   // first element owned, in the block's buffer
  int64_t size = 0;
  torch::Tensor value;  // fp32 [size] master weights (zero in the padding)
  // fp32 [size] gradient summed over ranks; undefined from ZeroGrad until
  // the step's first contribution arrives (FinishGrads makes it whole).
  torch::Tensor grad;
  CastCache compute;    // value in bf16, what is gathered under bf16 compute
};

// A layer's routed experts owned by this rank: experts [first, first + count)
// of w_gate, w_up and w_down, stored as [3][count][F * H] (gate, up, down).
struct ExpertShard {
  int64_t first = 0, count = 0;
  torch::Tensor value;  // fp32
  torch::Tensor grad;   // as BlockShard's
  // With ShardedModel::ExpertWgradFused: the parts of grad (bits 0 gate, 1
  // up, 2 down) written since grad was allocated this step.
  unsigned grad_parts = 0;
  // value in bf16, as for BlockShard; in expert_form.h's compute form when
  // ShardedModel::ExpertsInComputeForm().
  CastCache compute;
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
  // gathered weights until backward. prefetch_layers: P above (>= 0).
  ShardedModel(const spec::ModelSpec& spec, int64_t max_seq_len, uint64_t seed, Comm* comm,
               const ExpertMesh& mesh, torch::Device device, Wire wire,
               bool activation_checkpointing = true,
               const std::string& expert_gather_dtype = "float32", int prefetch_layers = 1);

  // Forward and backward over this rank's rows; gradients are added to the
  // shards' grad (summed over ranks), so calls after one ZeroGrad accumulate
  // (micro-batches). `global_targets` counts the positions with a target over
  // all ranks' rows of the whole step (the cross entropy's denominator),
  // `global_tokens` all positions of this forward over all ranks (the
  // balance loss's). Marks `laps` (if given) between forward and backward.
  // Waits for nothing on the device except the expert all-to-all's split
  // sizes (EP > 1). Gradient reductions may still be in flight on return:
  // FinishGrads (the optimizer calls it) completes them.
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
  // Releases the gradients (see BlockShard::grad).
  void ZeroGrad();
  // Waits for the gradient reductions in flight and adds them to the shards'
  // gradients, in the order they started; every gradient is defined after.
  void FinishGrads();
  void UpdateRouterBias(const std::vector<torch::Tensor>& counts, double rate);
  // Under bf16 compute, gather and compute with bf16 copies of the shards,
  // made once per optimizer step (CastCache), instead of casting the
  // gathered fp32 weights in every forward; the same values either way.
  // Default: the bf16_weights fusion (model/fusions.h).
  void SetWeightCopies(bool on) { weight_copies_ = on; }
  // Copies on and the last forward computed in bf16.
  bool CopiesInUse() const;
  // Gate and up of each expert in one GEMM (the gate_up_gemm fusion): the
  // experts' bf16 copies, what is gathered and its gradient take
  // expert_form.h's compute form. Needs the copies (CopiesInUse) and an
  // expert gather that sends them (not fp8). Default: the fusion's switch.
  void SetGateUpGemm(bool on) { gate_up_gemm_ = on; }
  bool ExpertsInComputeForm() const;
  // Keeps the checkpointed inputs of the first `layers` layers in a host
  // arena (parallel.offload_fraction, memory/activation_offload.h); 0: none.
  // Needs activation checkpointing. `shared_bounds`: the rank's memory bounds
  // with the ranks that share each (memory/host_room.h).
  void SetOffloadLayers(int layers, std::vector<MemoryBound> shared_bounds = {});
  ActivationOffload* offload() { return offload_.get(); }
  // The host arena's bytes; nullopt without offload.
  std::optional<int64_t> HostArenaBytes() const;
  // An expert shard's bf16 copy, in the layout that is gathered.
  const torch::Tensor& ExpertCopy(ExpertShard& e);

  // Used by LayerFn and ReduceWhenReady. A layer's gathered weights: its
  // dense part and its expert block.
  struct LayerWeights {
    torch::Tensor dense, experts;
  };
  // At world 1 a "gather" is the shard itself (no copy). Takes return the
  // step's gathers in their planned order. Leaves require grad; with direct
  // gradients (DirectGrads) a leaf's .grad is the shard's gradient buffer, so
  // backward accumulates into it and StartReduce has nothing left to do.
  LayerWeights TakeLayer(int layer);
  LayerWeights TakeLayerLeaves(int layer);
  // Starts sending `grad` (of block `block`'s dense part, or with `experts`
  // of its expert block) to the owners; the sum is added to the shard's
  // gradient when it is finished.
  void StartReduce(size_t block, bool experts, const torch::Tensor& grad);
  // With ExpertsInComputeForm: a layer's gathered expert block as gate_up and
  // down views (expert_form::Views), and its gradient as those two parts,
  // added to the shard's gradient part by part at world 1 and otherwise sent
  // to the owners as one block (undefined parts: zeros).
  ExpertWeights ExpertFormViews(const torch::Tensor& gathered) const;
  void StartExpertReduce(int layer, torch::Tensor gate_up, torch::Tensor down);
  // The expert_wgrad fusion (model/expert_wgrad_op.h): experts in compute form
  // with direct gradients on one rank, CUDA bf16. Backward then sums the
  // experts' weight gradients into the shard's fp32 gradient itself, part by
  // part: ExpertGradPart allocates it at the step's first contribution.
  bool ExpertWgradFused() const;
  WgradTarget ExpertGradPart(int layer, int part);
  LayerOutput RunLayer(int layer, const LayerWeights& w, const torch::Tensor& x,
                       const torch::Tensor& pending, bool recompute);
  torch::Device device() const { return device_; }

 private:
  spec::ModelSpec spec_;
  Comm* comm_;
  ExpertMesh mesh_;
  std::unique_ptr<Comm> ep_comm_, block_comm_;  // EP group; owners of this rank's expert block
  std::unique_ptr<Comm> dense_comm_;  // all ranks, for dense gathers and gradients (P > 0)
  Comm* dense_ = nullptr;             // dense_comm_, or comm_ when P = 0
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
  size_t prefetch_ = 1;  // parallel.prefetch_layers
  bool weight_copies_ = true;
  bool gate_up_gemm_ = true;
  std::unique_ptr<ActivationOffload> offload_;

  // The step's gathers: blocks in the order they are used, the next one to
  // start and to take, and those started but not taken.
  struct InFlight {
    size_t block;
    PendingTensor dense, experts;
  };
  std::vector<size_t> gather_order_;
  size_t started_ = 0, taken_ = 0;
  std::deque<InFlight> gathers_;
  struct Reduction {
    torch::Tensor* into;  // the shard's gradient (may be undefined until the sum lands)
    PendingTensor sum;
    bool compute_form;  // an expert block's, in expert_form.h's compute form
  };
  std::deque<Reduction> reductions_;

  // World 1, where the wire would not change the gradient: fp32 on the wire,
  // or bf16 compute (each weight's gradient is a bf16 value, which the bf16
  // wire rounds to itself). Then an fp32 leaf's gradient goes straight into
  // the shard's, and a bf16 leaf's (a weight copy's) is added to it.
  bool DirectGrads() const;
  // A leaf of `value` whose .grad is the shard's gradient itself (same dtype).
  bool DirectLeaf(const torch::Tensor& value) const;
  // into += grad in fp32, or into = grad for the step's first contribution
  // (copied unless `owned`: nothing else holds it). An expert block's
  // gradient in compute form goes back to the stored layout on the way.
  void AddInto(torch::Tensor& into, const torch::Tensor& grad, bool owned,
               bool compute_form) const;
  void FinishReductions();
  torch::Tensor Leaf(const torch::Tensor& value, torch::Tensor& grad);
  // What a block's gather sends: the shard in the compute dtype when weight
  // copies are on, else the fp32 master.
  torch::Tensor GatherSource(BlockShard& s);
  void PlanGathers();
  void StartGather(size_t block);
  LayerWeights Take(size_t block);
  // A leaf of block `block`'s gathered weights (dense part, or with
  // `experts` its expert block) for forward; unless gradients go straight
  // into the shard, what forward uses is wrapped so that the block's
  // gradient starts its reduction as soon as autograd has summed it.
  torch::Tensor ReducedInBackward(const torch::Tensor& gathered, size_t block, bool experts);
};

}  // namespace trellis::train
