#include "trainer_core/parallel/fsdp.h"

#include "trainer_core/compat_device_time.h"
#include "trainer_core/error.h"
#include "trainer_core/model/fusions.h"
#include "trainer_core/model/init.h"
#include "trainer_core/parallel/expert_form.h"

namespace trellis::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Elements [begin, begin + count) of a block from the counter-based init:
// the values the unsharded model has there; zeros from `limit` on (padding).
torch::Tensor InitShard(const BlockLayout& block, uint64_t seed, int64_t begin, int64_t count,
                        int64_t limit) {
  auto buf = torch::zeros({count}, torch::kFloat);
  for (const auto& p : block.params) {
    const int64_t lo = std::max(begin, p.offset);
    const int64_t hi = std::min({begin + count, p.offset + p.numel, limit});
    if (lo >= hi) continue;
    auto slice = buf.narrow(0, lo - begin, hi - lo);
    if (p.init == Init::kOnes)
      slice.fill_(1.0);
    else
      FillTruncatedNormal(ParamSeed(seed, block.FullName(p)), lo - p.offset, hi - lo, p.std,
                          slice.data_ptr<float>());
  }
  return buf;
}

// A layer whose forward keeps only its input: backward takes the layer's
// weights again (gathered ahead, in the step's plan), recomputes it with
// autograd on, and starts sending the weight gradient to the owners.
// Collective order is the same on every rank (backward runs layers in
// reverse on one thread).
class LayerFn : public torch::autograd::Function<LayerFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, ShardedModel* model,
                               int64_t layer) {
    ctx->saved_data["model"] = reinterpret_cast<int64_t>(model);
    ctx->saved_data["layer"] = layer;
    const int i = static_cast<int>(layer);
    if (model->offload() && model->offload()->Offloads(i))
      model->offload()->Store(i, x);  // the input lives in the host arena until backward
    else
      ctx->save_for_backward({x});
    // Summed here: the checkpoint keeps one tensor per layer.
    LayerOutput out =
        model->RunLayer(i, model->TakeLayer(i), x, /*pending=*/{}, /*recompute=*/false);
    return {out.Residual(), out.aux};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* model = reinterpret_cast<ShardedModel*>(ctx->saved_data["model"].toInt());
    const int64_t layer = ctx->saved_data["layer"].toInt();
    ActivationOffload* offload = model->offload();
    const bool offloaded = offload && offload->Offloads(static_cast<int>(layer));
    auto x = (offloaded ? offload->Take(static_cast<int>(layer)) : ctx->get_saved_variables()[0])
                 .detach()
                 .requires_grad_(true);
    // The next layer of backward's input on its way while this one computes.
    if (offload) offload->Prefetch(static_cast<int>(layer) - 1);
    auto w = model->TakeLayerLeaves(static_cast<int>(layer));
    {
      torch::AutoGradMode grad_on(true);
      LayerOutput out =
          model->RunLayer(static_cast<int>(layer), w, x, /*pending=*/{}, /*recompute=*/true);
      variable_list outs{out.Residual()}, gs{grads[0]};
      if (grads[1].defined()) {
        outs.push_back(out.aux);
        gs.push_back(grads[1]);
      }
      torch::autograd::backward(outs, gs);
    }
    model->StartReduce(layer + 1, /*experts=*/false, w.dense.grad());
    // A compute-form expert block's reduction started in its split's backward.
    if (!model->ExpertsInComputeForm())
      model->StartReduce(layer + 1, /*experts=*/true, w.experts.grad());
    return {x.grad(), torch::Tensor(), torch::Tensor()};
  }
};

// Identity on a block's gathered weights (a leaf). Autograd calls backward
// once their gradient is whole (every use has added its part): the
// reduction to the owners starts there, while the rest of backward runs, and
// the leaf itself gets no gradient. Every rank gets here at the same point
// of its backward (autograd's order depends on the graph, the same on all).
class ReduceWhenReady : public torch::autograd::Function<ReduceWhenReady> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& w, ShardedModel* model,
                               int64_t block, bool experts) {
    ctx->saved_data["model"] = reinterpret_cast<int64_t>(model);
    ctx->saved_data["block"] = block;
    ctx->saved_data["experts"] = experts;
    ctx->saved_data["numel"] = w.numel();
    return w;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* model = reinterpret_cast<ShardedModel*>(ctx->saved_data["model"].toInt());
    // Unused weights still take part: every rank sends every block.
    auto g = grads[0].defined()
                 ? grads[0]
                 : torch::zeros({ctx->saved_data["numel"].toInt()},
                                torch::TensorOptions(model->device()).dtype(torch::kFloat));
    model->StartReduce(ctx->saved_data["block"].toInt(), ctx->saved_data["experts"].toBool(), g);
    return {torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// A layer's gathered expert block in compute form (expert_form.h) as the
// gate_up and down weights forward multiplies. Backward has both gradients
// and hands them to the block's reduction as they are: where they go
// straight into the shard's fp32 gradient, each part is added there without
// first being concatenated into a block-sized buffer (what split's backward
// writes). For such blocks this takes ReduceWhenReady's place: it is the
// block's only use, so autograd calls it once the gradient is whole.
class ExpertFormSplit : public torch::autograd::Function<ExpertFormSplit> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& block,
                               ShardedModel* model, int64_t layer) {
    ctx->saved_data["model"] = reinterpret_cast<int64_t>(model);
    ctx->saved_data["layer"] = layer;
    ExpertWeights w = model->ExpertFormViews(block);
    return {w.gate_up, w.down};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* model = reinterpret_cast<ShardedModel*>(ctx->saved_data["model"].toInt());
    model->StartExpertReduce(static_cast<int>(ctx->saved_data["layer"].toInt()), grads[0],
                             grads[1]);
    return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

ShardedModel::ShardedModel(const spec::ModelSpec& spec, int64_t max_seq_len, uint64_t seed,
                           Comm* comm, const ExpertMesh& mesh, torch::Device device, Wire wire,
                           bool activation_checkpointing,
                           const std::string& expert_gather_dtype, int prefetch_layers)
    : spec_(spec),
      comm_(comm),
      mesh_(mesh),
      device_(device),
      wire_(wire),
      layout_(ModelLayout(spec)),
      checkpointing_(activation_checkpointing),
      weight_copies_(ActiveFusions().bf16_weights),
      gate_up_gemm_(ActiveFusions().gate_up_gemm) {
  expert_gather_ = ParseExpertGather(expert_gather_dtype);
  if (prefetch_layers < 0)
    throw TrainError("parallel.prefetch_layers: must be >= 0, got " +
                     std::to_string(prefetch_layers));
  prefetch_ = static_cast<size_t>(prefetch_layers);
  const int world = comm->size(), rank = comm->rank();
  // Every rank creates its subgroups in the same order (EP group first).
  ep_comm_ = comm->Subgroup("ep." + std::to_string(mesh.ep_group()), mesh.ep_ranks());
  block_comm_ = comm->Subgroup("experts." + std::to_string(mesh.ep_index()), mesh.block_ranks());
  dense_ = comm;
  if (prefetch_ > 0 && world > 1) {
    std::vector<int> all(world);
    for (int r = 0; r < world; ++r) all[r] = r;
    dense_comm_ = comm->Subgroup("dense", all);
    dense_ = dense_comm_.get();
  }
  for (const auto& block : layout_) {
    BlockShard s;
    s.layout = &block;
    s.numel = DenseNumel(block);
    s.size = (s.numel + world - 1) / world;
    s.padded = s.size * world;
    s.begin = s.size * rank;
    s.value = InitShard(block, seed, s.begin, s.size, s.numel).to(device);
    shards_.push_back(std::move(s));
  }
  const int64_t fh = int64_t{spec.expert_hidden} * spec.hidden;
  for (int i = 0; i < spec.layers; ++i) {
    const BlockLayout& block = layout_[i + 1];
    ExpertShard e;
    e.first = mesh.first_owned();
    e.count = mesh.per_rank();
    std::vector<torch::Tensor> parts;
    for (const char* name : {"w_gate", "w_up", "w_down"}) {
      const ParamInfo& p = block.Find(name);
      auto part = torch::empty({e.count * fh}, torch::kFloat);
      FillTruncatedNormal(ParamSeed(seed, block.FullName(p)), e.first * fh, e.count * fh, p.std,
                          part.data_ptr<float>());
      parts.push_back(part);
    }
    e.value = torch::cat(parts).to(device);
    experts_.push_back(std::move(e));
    router_bias_.push_back(torch::zeros({spec.experts}, torch::TensorOptions(device)));
  }
  counts_.resize(spec.layers);
  ep_splits_.resize(spec.layers);
  rope_ = BuildRope(max_seq_len, spec.hidden / spec.heads, spec.rope_theta, device, torch::kFloat);
}

int64_t ShardedModel::NumParams() const {
  int64_t n = 0;
  for (const auto& b : layout_) n += b.numel;
  return n;
}

void ShardedModel::ZeroGrad() {
  FinishReductions();
  // Released, not zeroed: the first contribution of the next step allocates
  // them, so a forward's activations never share memory with a whole model's
  // gradients (one forward per step) or do only from the second micro-batch.
  for (auto& s : shards_) s.grad = torch::Tensor();
  for (auto& e : experts_) e.grad = torch::Tensor();
}

void ShardedModel::AddInto(torch::Tensor& into, const torch::Tensor& grad, bool owned,
                           bool compute_form) const {
  if (compute_form)
    expert_form::AddTo(into, grad, mesh_.per_rank());
  else if (into.defined())
    into.add_(grad);
  else  // the step's first contribution: fp32, and never a tensor autograd still holds
    into = grad.to(torch::kFloat, /*non_blocking=*/false, /*copy=*/!owned);
}

void ShardedModel::SetOffloadLayers(int layers, std::vector<MemoryBound> shared_bounds) {
  TORCH_CHECK(layers == 0 || checkpointing_,
              "SetOffloadLayers: offload needs activation checkpointing");
  offload_ = layers > 0
                 ? std::make_unique<ActivationOffload>(layers, device_, std::move(shared_bounds))
                 : nullptr;
}

std::optional<int64_t> ShardedModel::HostArenaBytes() const {
  if (!offload_) return std::nullopt;
  return offload_->arena_bytes();
}

bool ShardedModel::DirectGrads() const {
  return comm_->size() == 1 && (wire_ == Wire::kFp32 || compute_dtype_ == torch::kBFloat16);
}

torch::Tensor ShardedModel::Leaf(const torch::Tensor& value, torch::Tensor& grad) {
  auto leaf = value.detach().requires_grad_(true);
  if (DirectLeaf(value)) {
    // Autograd adds into a leaf's existing .grad in place.
    if (!grad.defined()) grad = torch::zeros_like(value);
    leaf.mutable_grad() = grad;
  }
  return leaf;
}

bool ShardedModel::DirectLeaf(const torch::Tensor& value) const {
  return DirectGrads() && value.scalar_type() == torch::kFloat;  // the shards' gradient dtype
}

bool ShardedModel::CopiesInUse() const {
  return weight_copies_ && compute_dtype_ == torch::kBFloat16;
}

torch::Tensor ShardedModel::ReducedInBackward(const torch::Tensor& gathered, size_t block,
                                              bool experts) {
  auto leaf = Leaf(gathered, experts ? experts_[block - 1].grad : shards_[block].grad);
  if (DirectLeaf(gathered)) return leaf;
  if (experts && ExpertsInComputeForm()) return leaf;  // ExpertFormSplit reduces it
  return ReduceWhenReady::apply(leaf, this, static_cast<int64_t>(block), experts);
}

void ShardedModel::StartReduce(size_t block, bool experts, const torch::Tensor& grad) {
  torch::Tensor& into = experts ? experts_[block - 1].grad : shards_[block].grad;
  if (into.defined() && grad.is_same(into)) return;  // a direct leaf: accumulated there
  torch::NoGradGuard no_grad;
  const bool form = experts && ExpertsInComputeForm();
  if (DirectGrads()) {  // a weight copy's bf16 gradient, added in fp32
    AddInto(into, grad, /*owned=*/false, form);
    return;
  }
  // Each owner of an expert block gets its experts' gradient summed over the
  // EP groups that ran them.
  Comm& comm = experts ? *block_comm_ : *dense_;
  reductions_.push_back({&into, StartReduceScatter(comm, grad.contiguous(), wire_), form});
  // A layer's dense part and experts are two reductions.
  while (reductions_.size() > 2 * prefetch_) {
    Reduction r = std::move(reductions_.front());
    reductions_.pop_front();
    AddInto(*r.into, r.sum.Finish(), /*owned=*/true, r.compute_form);
  }
}

void ShardedModel::FinishReductions() {
  torch::NoGradGuard no_grad;
  while (!reductions_.empty()) {
    Reduction r = std::move(reductions_.front());
    reductions_.pop_front();
    AddInto(*r.into, r.sum.Finish(), /*owned=*/true, r.compute_form);
  }
}

void ShardedModel::FinishGrads() {
  FinishReductions();
  // A block no contribution reached this step (none in practice: every
  // block sends one) has a zero gradient.
  for (auto& s : shards_)
    if (!s.grad.defined()) s.grad = torch::zeros_like(s.value);
  for (auto& e : experts_)
    if (!e.grad.defined()) e.grad = torch::zeros_like(e.value);
}

LayerOutput ShardedModel::RunLayer(int layer, const LayerWeights& w, const torch::Tensor& x,
                                   const torch::Tensor& pending, bool recompute) {
  MoeWeights reduce;
  reduce.total_tokens = global_tokens_;
  reduce.global_counts = [this, layer, recompute](const torch::Tensor& local) {
    if (recompute) return counts_[layer];  // routing repeats exactly; no second all-reduce
    auto all = local.clone();
    comm_->AllReduceSum(all);
    counts_[layer] = all;
    return all;
  };
  // The block's experts as stacked weights: the gathered buffer is
  // [owners][gate, up, down][count][F * H], or [owners][compute form].
  const int64_t f = spec_.expert_hidden, h = spec_.hidden, nb = mesh_.per_block();
  const int64_t owners = block_comm_->size();
  ExpertWeights experts;
  if (ExpertWgradFused()) {  // no autograd edge to the block: backward adds into its gradient
    experts = ExpertFormViews(w.experts.detach());
    experts.wgrad_into = [this, layer](int part) { return ExpertGradPart(layer, part); };
  } else if (ExpertsInComputeForm()) {
    auto views = ExpertFormSplit::apply(w.experts, this, static_cast<int64_t>(layer));
    experts.gate_up = views[0];
    experts.down = views[1];
  } else {
    // unbind, not three selects: its backward writes the block's gradient in
    // one pass instead of zero-filling and adding a block-sized buffer per part.
    auto parts = w.experts.view({owners, 3, -1}).unbind(1);
    auto part = [&](int i, int64_t rows, int64_t cols) {
      return parts[i].reshape({nb, rows, cols}).to(compute_dtype_);
    };
    experts.gate = part(0, f, h);
    experts.up = part(1, f, h);
    experts.down = part(2, h, f);
  }
  reduce.run_experts = MakeEpRunner(ep_comm_.get(), mesh_, experts, &ep_splits_[layer],
                                    recompute, &routing_changed_,
                                    RoutingBalancedOver(mesh_, spec_.expert_groups));
  return LayerForward(spec_, *shards_[layer + 1].layout, w.dense, compute_dtype_, x, pending,
                      rope_, mask_, router_bias_[layer], reduce);
}

ShardedForward ShardedModel::ForwardBackward(const TokenBatch& local, int64_t global_targets,
                                             int64_t global_tokens, torch::Dtype compute_dtype,
                                             double aux_coef, compat::StepLaps* laps) {
  compute_dtype_ = compute_dtype;
  global_tokens_ = global_tokens;
  mask_ = DocumentCausalMask(local.doc_ids);
  routing_changed_ = torch::zeros({1}, torch::TensorOptions(device_).dtype(torch::kDouble));
  const size_t head_block = shards_.size() - 1;

  PlanGathers();
  auto embed = ReducedInBackward(Take(0).dense, 0, false);
  auto x = EmbedForward(*shards_[0].layout, embed, local.inputs, compute_dtype);
  std::vector<torch::Tensor> aux;
  torch::Tensor pending;  // the last layer's MoE output, not yet in x (LayerOutput)
  for (int i = 0; i < spec_.layers; ++i) {
    if (checkpointing_) {
      auto out = LayerFn::apply(x, this, static_cast<int64_t>(i));
      x = out[0];
      aux.push_back(out[1]);
      continue;
    }
    // Activations and gathered weights kept until backward; each layer's
    // gradients start their reduction as its backward ends.
    LayerWeights w = TakeLayer(i);
    w.dense = ReducedInBackward(w.dense, i + 1, false);
    w.experts = ReducedInBackward(w.experts, i + 1, true);
    LayerOutput out = RunLayer(i, w, x, pending, /*recompute=*/false);
    x = out.x;
    pending = out.pending;
    aux.push_back(out.aux);
  }
  if (pending.defined()) x = x + pending;
  auto head = ReducedInBackward(Take(head_block).dense, head_block, false);
  // This rank's share of the global mean: the ranks' losses add up to it.
  auto ce_sum =
      HeadCrossEntropySum(spec_, *shards_.back().layout, head, compute_dtype, x, local.targets);
  auto ce = ce_sum / static_cast<double>(std::max<int64_t>(1, global_targets));
  auto loss = aux_coef > 0 ? ce + aux_coef * torch::stack(aux).mean() : ce;
  ShardedForward r;
  // Summed on the device, where the communicator works, while backward runs;
  // read with the rest of the step record.
  r.ce = ce.detach().to(torch::kDouble).reshape({1});
  auto ce_all = comm_->StartAllReduceSum(r.ce);
  if (laps) laps->Mark();
  loss.backward();
  ce_all->Wait();
  r.routing_changed = routing_changed_;
  r.expert_counts = counts_;
  mask_ = torch::Tensor();
  return r;
}

void ShardedModel::UpdateRouterBias(const std::vector<torch::Tensor>& counts, double rate) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < counts.size(); ++i) {
    auto load = counts[i].to(torch::kFloat);
    router_bias_[i] += rate * torch::sign(load.mean() - load);
  }
}

}  // namespace trellis::train
