#pragma once
// The expert mesh and expert parallelism. world = nodes x node_size; the
// ranks form EP groups of `ep` consecutive ranks (inside a node). The experts
// of a layer are split into ep blocks of consecutive experts; block j lives
// on EP index j (rank % ep) of every EP group, and the world / ep ranks with
// that index (one per EP group, across nodes) shard it on expert boundaries,
// so each rank owns whole expert matrices. A layer gathers its block from
// those peers, and tokens travel inside the EP group to the rank holding
// their expert (all-to-all dispatch and combine).

#include <vector>

#include "trainer_core/model/layers.h"
#include "trainer_core/parallel/comm.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

struct ExpertMesh {
  int world = 1, rank = 0, node_size = 1, ep = 1, experts = 1;

  int ep_index() const { return rank % ep; }  // = the expert block this rank serves
  int ep_group() const { return rank / ep; }  // = this rank's index among the block's owners
  int replicas() const { return world / ep; }
  int per_block() const { return experts / ep; }
  int per_rank() const { return per_block() / replicas(); }
  int first_owned() const { return ep_index() * per_block() + ep_group() * per_rank(); }
  std::vector<int> ep_ranks() const;     // this rank's EP group
  std::vector<int> block_ranks() const;  // the owners of this rank's expert block
};

// node_size 0: `default_node_size`; ep 0: node_size. Throws TrainError naming
// parallel.node_size / parallel.ep when the mesh does not fit the world.
ExpertMesh PlanExpertMesh(int world, int rank, int node_size, int ep, int experts,
                          int default_node_size);

// How one layer's token slots split over the EP ranks, made in its forward
// and kept for its recompute in backward, where routing repeats exactly: the
// recompute then needs no second count exchange and no host read.
struct EpSplits {
  std::vector<int64_t> send_rows, recv_rows;  // slots to / from each EP rank
  int64_t received = 0;
  torch::Tensor mine;    // [EP sources, this rank's experts] slot counts, on the device
  torch::Tensor counts;  // this rank's own per-expert counts the split was made from
};

// Dispatches token slots (grouped by global expert, counts [experts]) to the
// EP ranks holding their experts, runs this rank's block (stacked weights
// [per_block, ...]) and returns the outputs to the slots' ranks, in the slots'
// order. Differentiable: backward runs the all-to-alls in reverse.
// With `reuse`, `splits` from the layer's forward are used as they are, and
// any difference between them and this call's counts is added to
// `*routing_changed` (a device counter the caller reads with the step's
// figures: a changed routing would have sent slots to the wrong ranks).
// Otherwise the split is exchanged and stored in `splits`. `balanced`: the
// routing sends every EP rank the same share of each rank's slots (group-
// limited routing with whole groups per rank, and the same tokens on every
// EP rank, as in a step); the split is then made without reading the counts
// on the host.
ExpertRunner MakeEpRunner(Comm* ep_comm, const ExpertMesh& mesh, ExpertWeights w,
                          EpSplits* splits, bool reuse, torch::Tensor* routing_changed,
                          bool balanced = false);

// Whether group-limited routing with `groups` groups sends every rank of the
// mesh's EP groups the same share of the slots: each rank holds whole groups.
bool RoutingBalancedOver(const ExpertMesh& mesh, int groups);

// Rows of `x` ([N, ...]) to the ranks of `comm`: send_rows[j] consecutive rows
// to rank j, recv_rows[j] from it. Differentiable.
torch::Tensor AllToAllRows(Comm* comm, const torch::Tensor& x,
                           const std::vector<int64_t>& send_rows,
                           const std::vector<int64_t>& recv_rows);

}  // namespace trellis::train
