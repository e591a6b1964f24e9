#pragma once
// A node's memory probe as the worker takes it before registering and the
// controller's launch gate judges it (docs/architecture.md, "A run's life, as
// implemented", step 4). One definition for both sides; the wire's is
// proto/trellis/v1/types.proto, converted in proto/node_probe_proto only. Torch-free,
// absl-free.
//
// The worker computes the figures (worker/core/memory_probe states the formula):
//   unattributed = max(0, (total - free) - attributed)
//   attributed   = file_pages + anon_pages + slab + kernel_stack + page_tables + hugepages
// Shmem is inside file_pages, so it is reported but not added again.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trellis {

// One socket: a NUMA node with CPUs. Bytes throughout.
struct SocketProbe {
  int numa_node = 0;
  std::string cpulist;  // as the kernel wrote it ("0-71")
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
  int64_t file_pages_bytes = 0;
  int64_t anon_pages_bytes = 0;
  int64_t slab_bytes = 0;
  int64_t kernel_stack_bytes = 0;
  int64_t page_tables_bytes = 0;
  int64_t shmem_bytes = 0;  // inside file_pages_bytes
  int64_t hugepages_bytes = 0;
  int64_t unattributed_bytes = 0;
  std::optional<int64_t> touch_obtainable_bytes;  // gate.touch_probe only
};

// A NUMA node without CPUs: device memory (a GH200 Hopper's HBM).
struct DeviceMemoryProbe {
  int numa_node = 0;
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
};

// What one worker reports at registration. A non-empty error fails the node
// at the gate; the figures read before it still travel (for the gate report).
struct NodeProbe {
  std::vector<SocketProbe> sockets;             // ascending numa_node
  std::vector<DeviceMemoryProbe> device_nodes;  // ascending numa_node
  std::string error;
  int64_t probed_unix_ms = 0;  // when the worker read sysfs; 0: unknown
};

// The index into a node's sockets (ascending) that local rank `local_rank` of
// `ranks_per_node` is bound to: i * sockets / ranks_per_node, so the ranks are
// spread evenly and neighbours share a socket (4 ranks on 4 sockets: 0,1,2,3;
// 8 ranks: 0,0,1,1,...; 2 ranks: 0,2). The worker binds ranks so; the gate
// counts each socket's ranks so.
inline int SocketIndexForRank(int local_rank, int ranks_per_node, int sockets) {
  return static_cast<int>(static_cast<int64_t>(local_rank) * sockets / ranks_per_node);
}

// How many of a node's `ranks_per_node` ranks are bound to socket `index`.
inline int RanksOnSocket(int index, int ranks_per_node, int sockets) {
  int ranks = 0;
  for (int r = 0; r < ranks_per_node; ++r)
    ranks += SocketIndexForRank(r, ranks_per_node, sockets) == index;
  return ranks;
}

}  // namespace trellis
