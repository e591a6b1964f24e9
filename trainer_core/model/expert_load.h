#pragma once
// The step record's routing figures (expert_load_max_over_mean and
// ep_load_max_over_mean): how unevenly a step's token-expert pairs fell on
// the experts, and on the EP ranks that hold blocks of them. The EP figure is
// what the step pays: the busiest GPU of a node sets the MoE layer's time.

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace trellis::train {

// `counts`: per MoE layer, the tokens routed to each expert over all ranks
// ([experts] each, any integer or floating dtype, on any device). Returns
// fp64 [2] on the counts' device, without a host read: the worst layer's
// busiest expert over its mean expert, and the worst layer's busiest EP block
// (experts / ep consecutive experts, the block EP rank j holds) over its mean
// block. A layer that routed nothing counts as even (1). `ep` must divide
// every layer's expert count.
torch::Tensor ExpertLoadFigures(const std::vector<torch::Tensor>& counts, int64_t ep);

}  // namespace trellis::train
