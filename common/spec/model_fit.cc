#include "common/spec/model_fit.h"

#include <string>

namespace trellis::spec {

std::string MicroBatchMismatch(const TrainingSpec& t, int world, const std::string& world_text) {
  const int64_t rows = t.global_batch / world;
  if (t.micro_batch <= 0 || rows % t.micro_batch == 0) return "";
  const std::string r = std::to_string(rows);
  return std::to_string(t.micro_batch) + " does not divide the " + r +
         " rows per rank (training.global_batch " + std::to_string(t.global_batch) + " over " +
         world_text + "); accepted: a divisor of " + r + ", or 0 (all " + r +
         " rows in one forward)";
}

std::string ExpertGroupsMismatch(const ModelSpec& m, int ep) {
  if (m.expert_groups == 1 || m.expert_groups % ep == 0) return "";
  const std::string g = std::to_string(m.expert_groups), e = std::to_string(ep);
  return g + " is not a multiple of the expert-parallel size " + e +
         " (parallel.ep): a group would straddle two ranks and the ranks' loads differ; "
         "accepted: 1 (plain top-k) or a multiple of " + e + " that divides model.experts and "
         "model.experts_per_token";
}

void CheckModelFitsWorld(const TrainerSpec& t, int nodes, int ranks_per_node,
                         FieldErrors* errors) {
  auto n = [](int64_t v) { return std::to_string(v); };
  const int world = nodes * ranks_per_node;
  const std::string world_text =
      "the world size " + n(world) + " (" + n(nodes) + (nodes == 1 ? " node x " : " nodes x ") +
      n(ranks_per_node) + (ranks_per_node == 1 ? " rank)" : " ranks)");
  if (t.training.global_batch % world != 0) {
    errors->push_back({"training.global_batch", "must be a multiple of " + world_text + ", got " +
                                                    n(t.training.global_batch)});
  } else if (auto why = MicroBatchMismatch(t.training, world, world_text); !why.empty()) {
    errors->push_back({"training.micro_batch", why});
  }
  const int node_size = t.parallel.node_size > 0 ? t.parallel.node_size : ranks_per_node;
  if (world % node_size != 0) {
    errors->push_back({"parallel.node_size", "must divide " + world_text + ", got " + n(node_size)});
    return;
  }
  const int ep = t.parallel.ep > 0 ? t.parallel.ep : node_size;
  if (node_size % ep != 0) {
    errors->push_back({"parallel.ep", "must divide parallel.node_size = " + n(node_size) +
                                          " (an expert-parallel group stays inside a node), got " +
                                          n(ep)});
    return;
  }
  if (t.model.experts % ep != 0) {
    errors->push_back(
        {"parallel.ep", "must divide model.experts = " + n(t.model.experts) + ", got " + n(ep)});
    return;
  }
  if (auto why = ExpertGroupsMismatch(t.model, ep); !why.empty())
    errors->push_back({"model.expert_groups", why});
  // Each EP block's experts are split on expert boundaries over the ranks
  // that share an EP index.
  const int per_block = t.model.experts / ep, replicas = world / ep;
  if (per_block % replicas != 0)
    errors->push_back({"model.experts",
                       "model.experts / parallel.ep = " + n(per_block) +
                           " experts per block cannot be split on expert boundaries over the " +
                           n(replicas) + " ranks sharing an expert-parallel index (world " +
                           n(world) + " / ep " + n(ep) + "); use a multiple of " +
                           n(replicas * ep) + " experts"});
}

}  // namespace trellis::spec
