// Reduce-scatter (comm.h, pending.h) built from one all-to-all of the
// communicator, which every backend has (gloo in LibTorch 1.13 has no
// reduce-scatter), the sum taken by the segment's owner.
#include "trainer_core/parallel/comm.h"
#include "trainer_core/parallel/pending.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

PendingTensor StartReduceScatter(Comm& comm, const at::Tensor& full, Wire wire) {
  const int world = comm.size();
  TORCH_CHECK((full.scalar_type() == torch::kFloat || full.scalar_type() == torch::kBFloat16) &&
                  full.is_contiguous(),
              "ReduceScatter: fp32 or bf16 contiguous input");
  TORCH_CHECK(full.numel() % world == 0, "ReduceScatter: size is not a multiple of the world");
  const int64_t n = full.numel() / world;
  // A bf16 gradient (of bf16 weight copies) on an fp32 wire is up-cast exactly.
  auto send = full.view(-1).to(wire == Wire::kBf16 ? torch::kBFloat16 : torch::kFloat);
  auto recv = torch::empty_like(send);
  std::vector<int64_t> counts(world, n);
  std::vector<std::unique_ptr<CommWork>> works;
  works.push_back(comm.StartAllToAll(send, counts, recv, counts));
  return PendingTensor(std::move(works), [recv, n, world] {
    auto sum = recv.narrow(0, 0, n).to(torch::kFloat, /*non_blocking=*/false, /*copy=*/true);
    for (int r = 1; r < world; ++r) sum.add_(recv.narrow(0, r * n, n).to(torch::kFloat));
    return sum;
  });
}

at::Tensor ReduceScatter(Comm& comm, const at::Tensor& full, Wire wire) {
  return StartReduceScatter(comm, full, wire).Finish();
}

}  // namespace trellis::train
