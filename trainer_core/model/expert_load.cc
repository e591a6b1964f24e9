#include "trainer_core/model/expert_load.h"

#include <stdexcept>
#include <string>

namespace trellis::train {
namespace {

// [forwards, layers, n] -> [1]: max over layers of (max over n, summed over
// forwards) / (mean over n, summed over forwards); 1 where a layer routed
// nothing.
torch::Tensor WorstMaxOverMean(const torch::Tensor& load) {
  const auto most = load.amax(2).sum(0);
  const auto mean = load.mean(2).sum(0);
  const auto ratio = most / mean.clamp_min(1e-300);
  return torch::where(mean > 0, ratio, torch::ones_like(ratio)).amax().reshape({1});
}

}  // namespace

torch::Tensor ExpertLoadFigures(const std::vector<std::vector<torch::Tensor>>& forwards,
                                int64_t ep) {
  if (forwards.empty() || forwards.front().empty())
    throw std::invalid_argument("expert load: no MoE layer's counts");
  const size_t layers = forwards.front().size();
  const int64_t experts = forwards.front().front().numel();
  if (ep < 1 || experts % ep != 0)
    throw std::invalid_argument("expert load: ep " + std::to_string(ep) +
                                " does not divide the layer's " + std::to_string(experts) +
                                " experts");
  std::vector<torch::Tensor> rows;
  rows.reserve(forwards.size() * layers);
  for (const auto& forward : forwards) {
    if (forward.size() != layers)
      throw std::invalid_argument("expert load: forwards have different layer counts");
    for (const auto& c : forward) {
      if (c.numel() != experts)
        throw std::invalid_argument("expert load: layers have different expert counts");
      rows.push_back(c.reshape({experts}).to(torch::kDouble));
    }
  }
  const int64_t f = static_cast<int64_t>(forwards.size()), l = static_cast<int64_t>(layers);
  const auto load = torch::stack(rows).view({f, l, experts});
  const auto blocks = load.view({f, l, ep, experts / ep}).sum(3);
  return torch::cat({WorstMaxOverMean(load), WorstMaxOverMean(blocks)});
}

}  // namespace trellis::train
