#include "worker/app/register_probe.h"

#include <chrono>

#include "common/log.h"
#include "worker/core/memory_probe.h"
#include "worker/io/sysfs_probe.h"
#include "worker/io/touch_probe.h"

namespace trellis::worker {
namespace {

void LogSocket(const SocketProbe& s) {
  spdlog::info(
      "socket {} (CPUs {}): {} GiB total, {} GiB free, {} GiB unattributed (file {}, anon {}, "
      "slab {}, kernel stack {}, page tables {}, hugepages {}; shmem {} inside file)",
      s.numa_node, s.cpulist, FormatGib(s.total_bytes), FormatGib(s.free_bytes),
      FormatGib(s.unattributed_bytes), FormatGib(s.file_pages_bytes), FormatGib(s.anon_pages_bytes),
      FormatGib(s.slab_bytes), FormatGib(s.kernel_stack_bytes), FormatGib(s.page_tables_bytes),
      FormatGib(s.hugepages_bytes), FormatGib(s.shmem_bytes));
}

// Touches every socket in turn; the first failure ends the probe with an error.
std::string TouchSockets(NodeProbe& probe, double touch_gib, Seconds touch_budget) {
  TouchProbeLimits limits;
  limits.max_bytes = static_cast<int64_t>(touch_gib * (int64_t{1} << 30));
  limits.budget = touch_budget / static_cast<double>(probe.sockets.size());
  for (SocketProbe& s : probe.sockets) {
    auto touched = TouchProbe(s.numa_node, limits);
    if (!touched.ok())
      return "memory probe, socket " + std::to_string(s.numa_node) + ": " +
             std::string(touched.status().message());
    s.touch_obtainable_bytes = touched->obtainable_bytes;
    spdlog::info("socket {}: touch probe obtained {} of {} GiB in {:.1f} s (stopped by {})",
                 s.numa_node, FormatGib(touched->obtainable_bytes), FormatGib(limits.max_bytes),
                 touched->elapsed.count(), touched->stopped_by);
  }
  return "";
}

}  // namespace

NodeProbe ProbeMemoryForRegister(const std::string& sysfs_root, bool touch, double touch_gib,
                                 Seconds touch_budget, WallTime probed_at) {
  const int64_t probed_unix_ms = ToUnixMillis(probed_at);
  absl::StatusOr<NodeProbe> read = ProbeNode(sysfs_root);
  NodeProbe probe = read.ok() ? std::move(*read) : NodeProbe{};
  probe.probed_unix_ms = probed_unix_ms;
  if (!read.ok()) {
    probe.error = "memory probe: " + std::string(read.status().message());
    spdlog::error("{}", probe.error);
    return probe;
  }
  spdlog::info("memory probe of {}: {} socket(s), {} device memory node(s)", sysfs_root,
               probe.sockets.size(), probe.device_nodes.size());
  for (const SocketProbe& s : probe.sockets) LogSocket(s);
  for (const DeviceMemoryProbe& d : probe.device_nodes)
    spdlog::info("device memory node {}: {} GiB total, {} GiB free", d.numa_node,
                 FormatGib(d.total_bytes), FormatGib(d.free_bytes));
  if (touch) {
    if (std::string error = TouchSockets(probe, touch_gib, touch_budget); !error.empty()) {
      probe.error = error;
      spdlog::error("{}", probe.error);
    }
  }
  return probe;
}

}  // namespace trellis::worker
