#pragma once
// The memory probe's pure half (docs/architecture.md, "A run's life, as
// implemented", step 4): parses one NUMA node's sysfs `meminfo` and `cpulist`
// text and turns them into the per-socket figures the launch gate judges
// (common/node_probe.h). The shell (worker/io/sysfs_probe) reads the files;
// nothing here touches the file system.
//
//   attributed   = FilePages + AnonPages + Slab + KernelStack + PageTables + hugepages
//   unattributed = max(0, (MemTotal - MemFree) - attributed)
//
// Shmem is inside FilePages (the kernel counts shmem/tmpfs pages as page
// cache), so it is reported but not added again. hugepages is the memory the
// node holds in hugetlb pages (HugePages_Total times the page size, see
// HugepagesBytes). Unattributed is what the kernel gives to no process and no
// category: driver allocations, leaked kernel memory, firmware carve-outs.

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/node_probe.h"

namespace trellis::worker {

// sysfs files are a page or two; anything larger is not what we think it is.
inline constexpr size_t kMaxSysfsFileBytes = 64 * 1024;
// Hugepage size assumed when sysfs names none (the x86-64 and arm64-4K default).
inline constexpr int64_t kDefaultHugepageBytes = 2 * 1024 * 1024;

// The fields of a per-node meminfo the probe uses, in kB as the kernel
// writes them (HugePages_Total is a page count).
struct NodeMeminfo {
  int64_t mem_total_kb = 0;
  int64_t mem_free_kb = 0;
  int64_t file_pages_kb = 0;
  int64_t anon_pages_kb = 0;
  int64_t slab_kb = 0;
  int64_t kernel_stack_kb = 0;
  int64_t page_tables_kb = 0;
  int64_t shmem_kb = 0;
  int64_t hugepages_total = 0;
};

struct CpuList {
  std::string text;  // as the kernel wrote it, without the newline ("0-71")
  int count = 0;     // 0: a CPU-less node (device memory)
};

// Parses `<path>` = nodeN/meminfo. Strict: every line must read
// "Node <node_id> <Field>: <digits>[ kB]" and end in a newline (a missing
// final newline means a truncated read); the fields of NodeMeminfo must each
// appear exactly once, with " kB" except HugePages_Total. Unknown fields are
// accepted (kernels add some). Errors name `path`, and the line or field.
absl::StatusOr<NodeMeminfo> ParseNodeMeminfo(absl::string_view text, int node_id,
                                             absl::string_view path);

// Parses `<path>` = nodeN/cpulist: "0-71", "0-3,8-11", or an empty line for a
// CPU-less node; ascending, non-overlapping ranges, one trailing newline.
absl::StatusOr<CpuList> ParseCpulist(absl::string_view text, absl::string_view path);

// "hugepages-2048kB" -> 2 MiB in bytes; an error for any other name.
absl::StatusOr<int64_t> ParseHugepageDirName(absl::string_view name);

// Bytes held in hugetlb pages on a node. `per_size` (page size in bytes ->
// nr_hugepages, from nodeN/hugepages/) counts every size, including the
// non-default ones that meminfo's HugePages_Total leaves out; when it is
// empty, HugePages_Total * default_size.
int64_t HugepagesBytes(const NodeMeminfo& meminfo, const std::map<int64_t, int64_t>& per_size,
                       int64_t default_size);

// unattributed = max(0, (MemTotal - MemFree) - attributed); see the top of the file.
SocketProbe MakeSocket(int numa_node, const CpuList& cpus, const NodeMeminfo& meminfo,
                       int64_t hugepages_bytes);
DeviceMemoryProbe MakeDeviceMemory(int numa_node, const NodeMeminfo& meminfo);

// The sysfs root (the directory holding devices/system/node): the flag when
// given, else $TRELLIS_SYSFS_ROOT with every "%n" replaced by the node name,
// else "/sys".
std::string ResolveSysfsRoot(const std::string& flag, const char* env_value,
                             const std::string& node_name);

// Bytes as GiB with one decimal ("119.7"), for logs.
std::string FormatGib(int64_t bytes);

}  // namespace trellis::worker
