#include "trainer_core/model/expert_load.h"

#include <stdexcept>
#include <string>

namespace trellis::train {
namespace {

// [layers, n] -> [1]: max over layers of (max over n / mean over n); 1 where
// a layer's mean is 0.
torch::Tensor WorstMaxOverMean(const torch::Tensor& load) {
  const auto mean = load.mean(1);
  const auto ratio = load.amax(1) / mean.clamp_min(1e-300);
  return torch::where(mean > 0, ratio, torch::ones_like(ratio)).amax().reshape({1});
}

}  // namespace

torch::Tensor ExpertLoadFigures(const std::vector<torch::Tensor>& counts, int64_t ep) {
  if (counts.empty()) throw std::invalid_argument("expert load: no MoE layer's counts");
  const int64_t experts = counts.front().numel();
  if (ep < 1 || experts % ep != 0)
    throw std::invalid_argument("expert load: ep " + std::to_string(ep) +
                                " does not divide the layer's " + std::to_string(experts) +
                                " experts");
  std::vector<torch::Tensor> rows;
  rows.reserve(counts.size());
  for (const auto& c : counts) {
    if (c.numel() != experts)
      throw std::invalid_argument("expert load: layers have different expert counts");
    rows.push_back(c.reshape({experts}).to(torch::kDouble));
  }
  const auto load = torch::stack(rows);  // [layers, experts]
  const auto blocks = load.view({load.size(0), ep, experts / ep}).sum(2);
  return torch::cat({WorstMaxOverMean(load), WorstMaxOverMean(blocks)});
}

}  // namespace trellis::train
