#pragma once
// The memory probe's shell: reads <root>/devices/system/node/nodeN/{meminfo,
// cpulist} (and nodeN/hugepages/ where present) and hands the text to the
// pure parsers in worker/core/memory_probe. Nodes with CPUs are sockets,
// CPU-less nodes device memory.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/core/memory_probe.h"

namespace trellis::worker {

// `sysfs_root` is the directory that holds devices/system/node ("/sys" on a
// real machine). Any missing, unreadable or malformed file fails the whole
// probe with a message naming the file: a node whose memory cannot be read
// must not pass the gate.
//
// Hugepages per node: the sum over nodeN/hugepages/hugepages-<size>kB/
// nr_hugepages when that directory exists (every page size); else meminfo's
// HugePages_Total times the size that <root>/kernel/mm/hugepages/ names when
// it names exactly one, else times 2 MiB.
absl::StatusOr<NodeProbe> ProbeNode(const std::string& sysfs_root);

// The NUMA node ids that have CPUs, ascending: the sockets ranks are bound to.
absl::StatusOr<std::vector<int>> SocketNodes(const std::string& sysfs_root);

}  // namespace trellis::worker
