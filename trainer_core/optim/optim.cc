#include "trainer_core/optim/optim.h"

#include <cmath>

#include "trainer_core/compat.h"

namespace trellis::train {

torch::Tensor ParamSlot::Value() const { return ParamView(flat.detach(), info); }
torch::Tensor ParamSlot::Grad() const { return ParamView(flat.grad(), info); }

std::vector<ParamSlot> SlotsFor(const std::vector<Block>& blocks, Optim optim) {
  std::vector<ParamSlot> out;
  for (const auto& b : blocks)
    for (const auto& p : b.layout->params)
      if (p.optim == optim) out.push_back({b.layout->FullName(p), b.flat, p});
  return out;
}

torch::Tensor NewtonSchulz(const torch::Tensor& g, int steps, torch::Dtype dtype) {
  const double a = 3.4445, b = -4.7750, c = 2.0315;
  auto x = g.to(dtype);
  // Iterate on the wide orientation so X X^T is the smaller Gram matrix.
  const bool tall = x.size(-2) > x.size(-1);
  if (tall) x = compat::MT(x);
  // Frobenius normalization puts every singular value in (0, 1].
  x = x / (x.norm(2, {-2, -1}, /*keepdim=*/true) + 1e-7);
  if (x.is_cuda() && x.dim() <= 3) {
    // B = b A + c A A and X = a X + B X as GEMMs with the sum in their
    // epilogue (addmm / baddbmm): no separate elementwise passes.
    auto fused = [](const torch::Tensor& in, const torch::Tensor& m1, const torch::Tensor& m2,
                    double beta, double alpha) {
      return in.dim() == 2 ? torch::addmm(in, m1, m2, beta, alpha)
                           : torch::baddbmm(in, m1, m2, beta, alpha);
    };
    for (int i = 0; i < steps; ++i) {
      auto gram = torch::matmul(x, compat::MT(x));
      x = fused(x, fused(gram, gram, gram, b, c), x, a, 1);
    }
  } else {
    for (int i = 0; i < steps; ++i) {
      auto gram = torch::matmul(x, compat::MT(x));
      auto poly = b * gram + c * torch::matmul(gram, gram);
      x = a * x + torch::matmul(poly, x);
    }
  }
  if (tall) x = compat::MT(x);
  // Contiguous in g's shape: callers view the result as flat matrices.
  return x.to(g.scalar_type()).contiguous();
}

Muon::Muon(std::vector<ParamSlot> params, MuonOptions options)
    : params_(std::move(params)), options_(options) {
  for (const auto& p : params_) momentum_.push_back(torch::zeros_like(p.Value()));
}

void Muon::Step(double lr) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto value = params_[i].Value(), grad = params_[i].Grad();
    momentum_[i].mul_(options_.momentum).add_(grad);
    auto update = grad.add(momentum_[i], options_.momentum);  // Nesterov look-ahead
    // Stacked experts [E, out, in] are orthogonalized as E independent matrices.
    auto ortho = NewtonSchulz(update, options_.ns_steps, options_.ns_dtype);
    // An orthogonal update has RMS ~ 1/sqrt(max dim); tall matrices get a
    // boost so their per-element step is comparable to wide ones.
    double rows = static_cast<double>(value.size(-2)), cols = static_cast<double>(value.size(-1));
    double scale = std::sqrt(std::max(1.0, rows / cols));
    if (params_[i].info.decay) value.mul_(1 - lr * options_.weight_decay);
    value.add_(ortho, -lr * scale);
  }
}

NamedTensors Muon::State() {
  NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i)
    out.emplace_back("muon.momentum." + params_[i].name, momentum_[i]);
  return out;
}

AdamW::AdamW(std::vector<ParamSlot> params, AdamWOptions options)
    : params_(std::move(params)), step_(torch::zeros({1}, torch::kLong)), options_(options) {
  for (const auto& p : params_) {
    m_.push_back(torch::zeros_like(p.Value()));
    v_.push_back(torch::zeros_like(p.Value()));
  }
}

void AdamW::Step(double lr) {
  torch::NoGradGuard no_grad;
  step_ += 1;
  const double t = static_cast<double>(step_.item<int64_t>());
  const double b1 = options_.beta1, b2 = options_.beta2;
  const double bias1 = 1 - std::pow(b1, t), bias2 = 1 - std::pow(b2, t);
  for (size_t i = 0; i < params_.size(); ++i) {
    auto value = params_[i].Value(), grad = params_[i].Grad();
    m_[i].mul_(b1).add_(grad, 1 - b1);
    v_[i].mul_(b2).addcmul_(grad, grad, 1 - b2);
    auto denom = (v_[i] / bias2).sqrt_().add_(options_.eps);
    if (params_[i].info.decay) value.mul_(1 - lr * options_.weight_decay);
    value.addcdiv_(m_[i], denom, -lr / bias1);
  }
}

NamedTensors AdamW::State() {
  NamedTensors out{{"adamw.step", step_}};
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back("adamw.m." + params_[i].name, m_[i]);
    out.emplace_back("adamw.v." + params_[i].name, v_[i]);
  }
  return out;
}

double ClipGradNorm(std::vector<Block>& blocks, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  for (auto& b : blocks) norms.push_back(b.flat.grad().norm().to(torch::kDouble));
  double norm = torch::stack(norms).norm().item<double>();
  if (max_norm > 0 && norm > max_norm) {
    for (auto& b : blocks) b.flat.mutable_grad().mul_(max_norm / (norm + 1e-6));
  }
  return norm;
}

}  // namespace trellis::train
