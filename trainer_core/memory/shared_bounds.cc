#include "trainer_core/memory/shared_bounds.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "trainer_core/compat.h"
#include "trainer_core/files.h"

namespace trellis::train {

std::vector<MemoryBound> BoundsSharedByTheRanks(Comm& comm, const torch::Device& device) {
  std::vector<MemoryBound> bounds = ReadMemoryBounds("", MemoryBindNodes());
  if (comm.size() == 1) return bounds;
  constexpr size_t kSlots = 16;  // the NUMA node or host, and its cgroups
  std::vector<uint64_t> mine = BoundKeys(HostName(), bounds);
  mine.resize(std::min(mine.size(), kSlots));  // any further bounds count as this rank's own
  at::Tensor local = torch::zeros({static_cast<int64_t>(kSlots)}, torch::kLong);
  for (size_t i = 0; i < mine.size(); ++i)
    local.data_ptr<int64_t>()[i] = static_cast<int64_t>(mine[i]);
  local = local.to(device);
  at::Tensor all = torch::empty({comm.size() * static_cast<int64_t>(kSlots)}, local.options());
  comm.AllGatherInto(local, all);
  const at::Tensor host = compat::ReadToHost(all);
  const int64_t* keys = host.data_ptr<int64_t>();
  SetRanksSharing(std::vector<uint64_t>(keys, keys + host.numel()), mine, &bounds);
  return bounds;
}

}  // namespace trellis::train
