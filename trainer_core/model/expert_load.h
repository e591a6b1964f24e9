#pragma once
// The step record's routing figures (expert_load_max_over_mean and
// ep_load_max_over_mean): how unevenly a step's token-expert pairs fell on
// the experts, and on the EP ranks that hold blocks of them. The EP figure is
// what the step pays: the busiest GPU of a node sets the MoE layer's time.

#include <cstdint>
#include <vector>

#include "trainer_core/torch_api.h"

namespace trellis::train {

// `forwards`: for each forward of the step (its micro-batches), per MoE layer
// the tokens routed to each expert over all ranks ([experts] each, any
// integer or floating dtype, on any device). Returns fp64 [2] on the counts'
// device, without a host read: over the worst layer, its busiest expert
// summed over the forwards over its mean expert summed likewise, and the same
// for its EP blocks (experts / ep consecutive experts, the block EP rank j
// holds). Each forward waits for its own busiest expert (block), so this is
// the factor by which imbalance stretches the layer's step, and a busiest
// expert that changes from one micro-batch to the next still counts; with
// one forward it is that forward's max over mean. A layer that routed
// nothing counts as even (1). `ep` must divide every layer's expert count.
torch::Tensor ExpertLoadFigures(const std::vector<std::vector<torch::Tensor>>& forwards,
                                int64_t ep);

}  // namespace trellis::train
