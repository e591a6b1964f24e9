#include "trainer_core/parallel/shard_optim.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "trainer_core/model/fusions.h"
#include "trainer_core/optim/muon_kernels.h"
#include "trainer_core/optim/ns_kernel.h"
#include "trainer_core/parallel/expert_form.h"

namespace trellis::train {

ShardedOptimizer::ShardedOptimizer(ShardedModel* model, MuonOptions muon, AdamWOptions adamw)
    : model_(model),
      comm_(&model->comm()),
      muon_(muon),
      adamw_(adamw),
      step_(torch::zeros({1}, torch::kLong)) {
  auto& shards = model->shards();
  std::vector<int64_t> load(comm_->size(), 0);
  for (size_t b = 0; b < shards.size(); ++b) {
    const BlockShard& s = shards[b];
    moment1_.push_back(torch::zeros_like(s.value));
    moment2_.push_back(torch::zeros_like(s.value));
    for (const auto& p : s.layout->params) {
      if (p.offset >= s.numel) continue;  // routed experts: ExpertMuonStep
      const int64_t lo = std::max(s.begin, p.offset);
      const int64_t hi = std::min(s.begin + s.size, p.offset + p.numel);
      if (p.optim == Optim::kMuon) units_.push_back({b, &p, -1});
      if (lo >= hi) continue;
      Piece piece{b, &p, lo - s.begin, hi - lo, lo - p.offset};
      (p.optim == Optim::kMuon ? muon_pieces_ : adamw_pieces_).push_back(piece);
    }
  }
  for (auto& e : model->experts()) expert_momentum_.push_back(torch::zeros_like(e.value));
  // Owners: largest first, each to the least-loaded rank (ties: lowest rank).
  std::vector<size_t> order(units_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return units_[a].param->numel > units_[b].param->numel;
  });
  for (size_t u : order) {
    int owner = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    units_[u].owner = owner;
    load[owner] += units_[u].param->numel;
  }
}

std::pair<int64_t, int64_t> ShardedOptimizer::Span(const Unit& u, int rank) const {
  const BlockShard& s = model_->shards()[u.block];
  const int64_t begin = s.size * rank;
  const int64_t lo = std::max(begin, u.param->offset);
  const int64_t hi = std::min(begin + s.size, u.param->offset + u.param->numel);
  return {lo - u.param->offset, std::max<int64_t>(0, hi - lo)};
}

torch::Tensor ShardedOptimizer::ClipGradNorm(double max_norm) {
  torch::NoGradGuard no_grad;
  model_->FinishGrads();  // the reductions still in flight
  // Summed on the device. On CUDA each gradient's norm in fp32 (a tree
  // reduction) instead of an fp64 copy of 10 GB of gradients.
  auto square = [](const torch::Tensor& g) {
    return g.is_cuda() ? g.norm().to(torch::kDouble).pow(2) : g.to(torch::kDouble).pow(2).sum();
  };
  auto sq = torch::zeros({1}, model_->shards()[0].grad.options().dtype(torch::kDouble));
  for (auto& s : model_->shards()) sq += square(s.grad);
  for (auto& e : model_->experts()) sq += square(e.grad);
  comm_->AllReduceSum(sq);
  auto norm = sq.sqrt();
  expert_clip_factor_ = torch::Tensor();
  if (max_norm > 0) {
    // The reference's rule (clip only above the limit) as a device factor.
    auto factor = torch::where(norm > max_norm, max_norm / (norm + 1e-6), torch::ones_like(norm))
                      .to(torch::kFloat);
    for (auto& s : model_->shards()) s.grad.mul_(factor);
    for (auto& e : model_->experts())
      if (!ClipsInMomentum(e)) e.grad.mul_(factor);
    expert_clip_factor_ = factor;
  }
  return norm;
}

bool ShardedOptimizer::ClipsInMomentum(const ExpertShard& e) {
  return ActiveFusions().clip_in_momentum && FusedMuonAvailable(e.grad);
}

void ShardedOptimizer::Step(double muon_lr, double adamw_lr) {
  torch::NoGradGuard no_grad;
  model_->FinishGrads();
  MuonStep(muon_lr);
  ExpertMuonStep(muon_lr);
  expert_clip_factor_ = torch::Tensor();  // paid
  AdamWStep(adamw_lr);
}

void ShardedOptimizer::AdamWStep(double lr) {
  step_ += 1;
  const double t = static_cast<double>(step_.item<int64_t>());
  const double b1 = adamw_.beta1, b2 = adamw_.beta2;
  const double bias1 = 1 - std::pow(b1, t), bias2 = 1 - std::pow(b2, t);
  auto& shards = model_->shards();
  for (const Piece& p : adamw_pieces_) {
    auto value = shards[p.block].value.narrow(0, p.local, p.len);
    auto grad = shards[p.block].grad.narrow(0, p.local, p.len);
    auto m = moment1_[p.block].narrow(0, p.local, p.len);
    auto v = moment2_[p.block].narrow(0, p.local, p.len);
    m.mul_(b1).add_(grad, 1 - b1);
    v.mul_(b2).addcmul_(grad, grad, 1 - b2);
    auto denom = (v / bias2).sqrt_().add_(adamw_.eps);
    if (p.param->decay) value.mul_(1 - lr * adamw_.weight_decay);
    value.addcdiv_(m, denom, -lr / bias1);
  }
}

void ShardedOptimizer::MuonStep(double lr) {
  auto& shards = model_->shards();
  const int world = comm_->size(), me = comm_->rank();
  // Nesterov update of the owned elements, in a per-block buffer.
  std::vector<torch::Tensor> update(shards.size());
  for (const Piece& p : muon_pieces_) {
    auto grad = shards[p.block].grad.narrow(0, p.local, p.len);
    auto mom = moment1_[p.block].narrow(0, p.local, p.len);
    mom.mul_(muon_.momentum).add_(grad);
    if (!update[p.block].defined()) update[p.block] = torch::zeros_like(shards[p.block].value);
    update[p.block].narrow(0, p.local, p.len).copy_(grad.add(mom, muon_.momentum));
  }
  auto local_of = [&](const Unit& u, int64_t in_param) {
    return u.param->offset + in_param - shards[u.block].begin;
  };

  // Pieces to the owners: segment d holds, unit by unit, my piece of every
  // unit that d owns.
  std::vector<int64_t> send_counts(world, 0), recv_counts(world, 0);
  std::vector<torch::Tensor> send;
  for (int d = 0; d < world; ++d)
    for (const Unit& u : units_) {
      if (u.owner != d) continue;
      auto [off, len] = Span(u, me);
      if (len > 0) send.push_back(update[u.block].narrow(0, local_of(u, off), len));
      send_counts[d] += len;
    }
  for (int r = 0; r < world; ++r)
    for (const Unit& u : units_)
      if (u.owner == me) recv_counts[r] += Span(u, r).second;
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(shards[0].value.device());
  auto send_buf = send.empty() ? torch::empty({0}, opts) : torch::cat(send);
  auto recv_buf =
      torch::empty({std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0})}, opts);
  comm_->AllToAll(send_buf, send_counts, recv_buf, recv_counts);

  // Assemble, orthogonalize, and lay the results out for the return trip
  // (the same segments with the roles swapped).
  std::vector<torch::Tensor> whole(units_.size());
  for (size_t i = 0; i < units_.size(); ++i)
    if (units_[i].owner == me) whole[i] = torch::empty({units_[i].param->numel}, opts);
  int64_t at = 0;
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < units_.size(); ++i) {
      if (units_[i].owner != me) continue;
      auto [off, len] = Span(units_[i], r);
      if (len > 0) whole[i].narrow(0, off, len).copy_(recv_buf.narrow(0, at, len));
      at += len;
    }
  for (size_t i = 0; i < units_.size(); ++i)
    if (whole[i].defined())
      whole[i] = NewtonSchulz(whole[i].view(units_[i].param->shape), muon_.ns_steps, muon_.ns_dtype)
                     .reshape(-1);
  std::vector<torch::Tensor> back;
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < units_.size(); ++i) {
      if (units_[i].owner != me) continue;
      auto [off, len] = Span(units_[i], r);
      if (len > 0) back.push_back(whole[i].narrow(0, off, len));
    }
  auto back_buf = back.empty() ? torch::empty({0}, opts) : torch::cat(back);
  auto ortho_buf = torch::empty_like(send_buf);
  comm_->AllToAll(back_buf, recv_counts, ortho_buf, send_counts);

  at = 0;
  for (int d = 0; d < world; ++d)
    for (const Unit& u : units_) {
      if (u.owner != d) continue;
      auto [off, len] = Span(u, me);
      if (len == 0) continue;
      auto value = shards[u.block].value.narrow(0, local_of(u, off), len);
      const auto& shape = u.param->shape;
      double rows = static_cast<double>(shape[shape.size() - 2]);
      double cols = static_cast<double>(shape.back());
      double scale = std::sqrt(std::max(1.0, rows / cols));
      if (u.param->decay) value.mul_(1 - lr * muon_.weight_decay);
      value.add_(ortho_buf.narrow(0, at, len), -lr * scale);
      at += len;
    }
}

void ShardedOptimizer::ExpertMuonStep(double lr) {
  const auto& spec = model_->spec();
  const int64_t f = spec.expert_hidden, h = spec.hidden;
  for (size_t i = 0; i < expert_momentum_.size(); ++i) {
    ExpertShard& e = model_->experts()[i];
    if (e.count == 0) continue;
    const BlockLayout& block = *model_->shards()[i + 1].layout;
    torch::Tensor& mom = expert_momentum_[i];
    torch::Tensor update;
    const bool kernel_ns =
        e.grad.is_cuda() && muon_.ns_dtype == torch::kBFloat16 && KernelNewtonSchulzEnabled();
    const bool fused = FusedMuonAvailable(e.grad);
    // The bf16 weights forward reads, written by the step itself, part by
    // part in the layout that forward gathers.
    torch::Tensor copy;
    const bool form = model_->ExpertsInComputeForm();
    if (fused && model_->CopiesInUse()) copy = e.compute.Buffer(e.value, torch::kBFloat16);
    auto copy_part = [&](int part) {
      if (!copy.defined()) return torch::Tensor();
      return form ? expert_form::Part(copy, e.count, part) : copy.view({3, e.count, f * h})[part];
    };
    if (e.grad.is_cuda()) {
      // The Nesterov update written straight in the Newton-Schulz dtype (these
      // buffers are most of the model: the optimizer is memory-bound here);
      // the kernel Newton-Schulz takes fp32 and converts to bf16 itself.
      update = torch::empty_like(mom, mom.options().dtype(kernel_ns ? torch::kFloat
                                                                     : muon_.ns_dtype));
      if (fused) {  // both in one pass, the clip factor too where it is owed
        FusedMuonMomentum(e.grad, mom, update, muon_.momentum,
                          ClipsInMomentum(e) ? expert_clip_factor_ : torch::Tensor());
      } else {  // one pass each
        at::add_out(mom, e.grad, mom, muon_.momentum);
        at::add_out(update, e.grad, mom, muon_.momentum);
      }
    } else {
      mom.mul_(muon_.momentum).add_(e.grad);
      update = e.grad.add(mom, muon_.momentum);
    }
    update = update.view({3, e.count, f * h});
    auto value = e.value.view({3, e.count, f * h});
    const char* names[] = {"w_gate", "w_up", "w_down"};
    for (int part = 0; part < 3; ++part) {
      const bool down = part == 2;
      const int64_t rows = down ? h : f, cols = down ? f : h;
      auto g = update[part].view({e.count, rows, cols});
      const double scale = std::sqrt(std::max(1.0, static_cast<double>(rows) / cols));
      const double decay = block.Find(names[part]).decay ? 1 - lr * muon_.weight_decay : 1.0;
      auto v = value[part];
      if (fused && kernel_ns && ActiveFusions().ns_apply) {  // no fp32 result in memory
        KernelNewtonSchulzApply(g, muon_.ns_steps, v, decay, -lr * scale, copy_part(part));
        continue;
      }
      auto ortho = kernel_ns ? KernelNewtonSchulz(g, muon_.ns_steps)
                             : NewtonSchulz(g, muon_.ns_steps, muon_.ns_dtype);
      if (fused) {  // ATen's Newton-Schulz (TRELLIS_KERNEL_NS=0) returns the update's dtype
        FusedApplyUpdate(v, ortho.view({e.count, f * h}).to(torch::kFloat), decay, -lr * scale,
                         copy_part(part));
        continue;
      }
      if (decay != 1.0) v.mul_(decay);
      v.add_(ortho.view({e.count, f * h}), -lr * scale);
    }
    if (copy.defined()) e.compute.MarkCurrent(e.value, form ? expert_form::kCastLayout : 0);
  }
}

NamedTensors ShardedOptimizer::State() {
  NamedTensors out{{"adamw.step", step_}};
  auto& shards = model_->shards();
  for (size_t b = 0; b < shards.size(); ++b) {
    out.emplace_back("moment1." + shards[b].layout->name, moment1_[b]);
    out.emplace_back("moment2." + shards[b].layout->name, moment2_[b]);
  }
  for (size_t i = 0; i < expert_momentum_.size(); ++i)
    out.emplace_back("moment1.experts." + shards[i + 1].layout->name, expert_momentum_[i]);
  return out;
}

}  // namespace trellis::train
