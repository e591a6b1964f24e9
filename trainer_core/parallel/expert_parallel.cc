#include "trainer_core/parallel/expert_parallel.h"

#include "trainer_core/compat.h"
#include "trainer_core/error.h"

namespace trellis::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A host tensor's values.
std::vector<int64_t> ToVector(const torch::Tensor& t) {
  auto c = t.to(torch::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

class AllToAllFn : public torch::autograd::Function<AllToAllFn> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, Comm* comm,
                               std::vector<int64_t> send_rows, std::vector<int64_t> recv_rows) {
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(comm);
    ctx->saved_data["send"] = send_rows;
    ctx->saved_data["recv"] = recv_rows;
    return Move(comm, x, send_rows, recv_rows);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* comm = reinterpret_cast<Comm*>(ctx->saved_data["comm"].toInt());
    auto send = ctx->saved_data["send"].toIntVector();
    auto recv = ctx->saved_data["recv"].toIntVector();
    return {Move(comm, grads[0], recv, send), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }

  static torch::Tensor Move(Comm* comm, const torch::Tensor& x, const std::vector<int64_t>& send,
                            const std::vector<int64_t>& recv) {
    // Elements per row from the trailing sizes, not numel / rows: a rank
    // that received no slots still sends [0, H] and must receive its rows.
    int64_t row = 1;
    for (int64_t d = 1; d < x.dim(); ++d) row *= x.size(d);
    int64_t total = 0;
    std::vector<int64_t> sc, rc;
    for (auto n : send) sc.push_back(n * row);
    for (auto n : recv) {
      rc.push_back(n * row);
      total += n;
    }
    auto shape = x.sizes().vec();
    shape[0] = total;
    auto out = torch::empty(shape, x.options());
    comm->AllToAll(x.contiguous(), sc, out, rc);
    return out;
  }
};

}  // namespace

std::vector<int> ExpertMesh::ep_ranks() const {
  std::vector<int> r;
  for (int i = 0; i < ep; ++i) r.push_back(ep_group() * ep + i);
  return r;
}

std::vector<int> ExpertMesh::block_ranks() const {
  std::vector<int> r;
  for (int g = 0; g < replicas(); ++g) r.push_back(g * ep + ep_index());
  return r;
}

ExpertMesh PlanExpertMesh(int world, int rank, int node_size, int ep, int experts,
                          int default_node_size) {
  ExpertMesh m;
  m.world = world;
  m.rank = rank;
  m.experts = experts;
  m.node_size = node_size > 0 ? node_size : default_node_size;
  m.ep = ep > 0 ? ep : m.node_size;
  auto n = [](int v) { return std::to_string(v); };
  if (m.node_size < 1 || world % m.node_size != 0)
    throw TrainError("parallel.node_size = " + n(m.node_size) + " does not divide the world size " +
                     n(world));
  if (m.node_size % m.ep != 0)
    throw TrainError("parallel.ep = " + n(m.ep) + " does not divide parallel.node_size = " +
                     n(m.node_size) + " (an EP group stays inside a node)");
  if (experts % m.ep != 0)
    throw TrainError("parallel.ep = " + n(m.ep) + " does not divide model.experts = " + n(experts));
  if (m.per_block() % m.replicas() != 0)
    throw TrainError("model.experts / parallel.ep = " + n(m.per_block()) +
                     " experts per block cannot be split on expert boundaries over the " +
                     n(m.replicas()) + " ranks that share an EP index (world " + n(world) +
                     " / ep " + n(m.ep) + ")");
  return m;
}

bool RoutingBalancedOver(const ExpertMesh& mesh, int groups) {
  return groups > 1 && groups % mesh.ep == 0;
}

torch::Tensor AllToAllRows(Comm* comm, const torch::Tensor& x,
                           const std::vector<int64_t>& send_rows,
                           const std::vector<int64_t>& recv_rows) {
  return AllToAllFn::apply(x, comm, send_rows, recv_rows);
}

ExpertRunner MakeEpRunner(Comm* ep_comm, const ExpertMesh& mesh, ExpertWeights w,
                          EpSplits* splits, bool reuse, torch::Tensor* routing_changed,
                          bool balanced) {
  return [=](const torch::Tensor& xs, const torch::Tensor& counts) {
    // One EP rank holds every expert: nothing to move, and no host sync for
    // the split sizes.
    if (mesh.ep == 1) return RunLocalExperts(xs, counts, w);
    const int64_t ep = mesh.ep, nb = mesh.per_block(), me = ep_comm->rank();
    if (reuse) {
      routing_changed->add_((counts != splits->counts).any().to(routing_changed->scalar_type()));
    } else {
      // Every EP rank's slot counts per expert: [ep sources, experts],
      // gathered on the device.
      auto all = torch::empty({ep * mesh.experts}, counts.options().dtype(torch::kLong));
      ep_comm->AllGatherInto(counts.to(torch::kLong).contiguous(), all);
      all = all.view({ep, mesh.experts});
      if (balanced) {
        // Every rank sends each EP rank a ep-th of its slots: the split is
        // known without reading the counts.
        splits->send_rows.assign(ep, xs.size(0) / ep);
        splits->recv_rows = splits->send_rows;
        splits->received = xs.size(0);
      } else {
        // The all-to-all needs its split sizes on the host: the one host
        // synchronization of a layer's dispatch.
        auto host = compat::ReadToHost(all).view({ep, ep, nb});  // [source, destination, expert]
        splits->send_rows = ToVector(host.select(0, me).sum(1));
        splits->recv_rows = ToVector(host.select(1, me).sum(1));
        splits->received = 0;
        for (int64_t n : splits->recv_rows) splits->received += n;
      }
      splits->mine = all.narrow(1, me * nb, nb);  // [sources, my experts]
      splits->counts = counts;
    }
    const EpSplits& s = *splits;
    auto recv = AllToAllRows(ep_comm, xs, s.send_rows, s.recv_rows);
    // Received rows come source by source, each grouped by expert; regroup by
    // expert (stable: sources stay in order), run, and undo the regrouping.
    auto expert_of = torch::arange(nb, s.mine.options())
                         .repeat({ep})
                         .repeat_interleave(s.mine.reshape(-1), /*dim=*/0, s.received);
    auto perm = std::get<1>(torch::sort(expert_of, /*stable=*/true, 0, false));
    auto out = RunLocalExperts(recv.index_select(0, perm), s.mine.sum(0), w);
    auto inverse =
        torch::empty_like(perm).scatter_(0, perm, torch::arange(perm.numel(), perm.options()));
    out = out.index_select(0, inverse);
    return AllToAllRows(ep_comm, out, s.recv_rows, s.send_rows);
  };
}

}  // namespace trellis::train
