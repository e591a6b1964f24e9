// The memory probe's parsers (worker/core/memory_probe): one NUMA node's sysfs
// meminfo and cpulist, hugepage directory names, and the per-socket figures the
// launch gate judges. A node whose files cannot be read must fail its probe,
// never pass the gate with figures that do not add up.
//
// Input: fields separated by NUL bytes (sysfs text has none):
//   node id (decimal) \0 meminfo \0 cpulist \0 hugepages-<size>kB[=count] \0 ...
// A missing cpulist reads as "0\n" (one CPU: a socket). A hugepage directory
// with "=count" is one of nodeN/hugepages/ (its nr_hugepages), else one of
// kernel/mm/hugepages/ (the size HugePages_Total counts in).

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "fuzz/check.h"
#include "worker/core/memory_probe.h"

namespace trellis::fuzz {
namespace {

using worker::NodeMeminfo;

constexpr int64_t kMaxKb = std::numeric_limits<int64_t>::max() / 1024;
constexpr int64_t kMaxCpus = (int64_t{1} << 20) + 1;

// absl's own string_view: the system absl does not take std::string_view.
std::vector<absl::string_view> SplitNul(absl::string_view s) {
  std::vector<absl::string_view> parts;
  for (size_t start = 0;;) {
    size_t end = s.find('\0', start);
    parts.push_back(s.substr(start, end == absl::string_view::npos ? end : end - start));
    if (end == absl::string_view::npos) return parts;
    start = end + 1;
  }
}

// As the shell reads nodeN: digits only; anything else is node 0.
int NodeId(absl::string_view s) {
  if (s.empty() || s.size() > 7) return 0;
  int id = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return 0;
    id = id * 10 + (c - '0');
  }
  return id;
}

void CheckMeminfo(const NodeMeminfo& m) {
  for (int64_t v : {m.mem_total_kb, m.mem_free_kb, m.file_pages_kb, m.anon_pages_kb, m.slab_kb,
                    m.kernel_stack_kb, m.page_tables_kb, m.shmem_kb, m.hugepages_total})
    FUZZ_CHECK(v >= 0 && v <= kMaxKb);
  FUZZ_CHECK(m.mem_free_kb <= m.mem_total_kb);
}

void CheckSocket(const SocketProbe& s, const NodeMeminfo& m) {
  FUZZ_CHECK(s.total_bytes == m.mem_total_kb * 1024 && s.free_bytes == m.mem_free_kb * 1024);
  FUZZ_CHECK(s.hugepages_bytes >= 0);
  for (int64_t v : {s.file_pages_bytes, s.anon_pages_bytes, s.slab_bytes, s.kernel_stack_bytes,
                    s.page_tables_bytes, s.shmem_bytes})
    FUZZ_CHECK(v >= 0);
  FUZZ_CHECK(s.unattributed_bytes >= 0);
  FUZZ_CHECK(s.unattributed_bytes <= s.total_bytes - s.free_bytes);
}

}  // namespace

void FuzzMeminfo(const uint8_t* data, size_t size) {
  const std::vector<absl::string_view> parts =
      SplitNul(absl::string_view(reinterpret_cast<const char*>(data), size));
  const int node = NodeId(parts[0]);
  const absl::string_view meminfo_text = parts.size() > 1 ? parts[1] : absl::string_view();
  const absl::string_view cpulist_text = parts.size() > 2 ? parts[2] : absl::string_view("0\n");

  // The size HugePages_Total counts in: the one size the kernel names, else 2 MiB.
  int64_t default_size = worker::kDefaultHugepageBytes;
  int sizes = 0;
  std::map<int64_t, int64_t> per_size;
  for (size_t i = 3; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    auto bytes = worker::ParseHugepageDirName(parts[i].substr(0, eq));
    if (!bytes.ok()) continue;
    FUZZ_CHECK(*bytes > 0 && *bytes % 1024 == 0);
    int64_t count = 0;
    if (eq == absl::string_view::npos) {
      if (++sizes == 1) default_size = *bytes;
    } else if (absl::SimpleAtoi(parts[i].substr(eq + 1), &count) && count >= 0) {
      per_size[*bytes] = count;  // the shell reads digits only
    }
  }
  if (sizes != 1) default_size = worker::kDefaultHugepageBytes;

  auto cpus = worker::ParseCpulist(cpulist_text, "cpulist");
  if (cpus.ok()) {
    FUZZ_CHECK(cpus->count >= 0 && cpus->count <= kMaxCpus);
    FUZZ_CHECK((cpus->count == 0) == cpus->text.empty());
    FUZZ_CHECK(cpus->text.size() + 1 == cpulist_text.size());
  } else {
    FUZZ_CHECK(!cpus.status().message().empty());
  }

  auto meminfo = worker::ParseNodeMeminfo(meminfo_text, node, "meminfo");
  if (!meminfo.ok()) {
    FUZZ_CHECK(!meminfo.status().message().empty());
    return;
  }
  CheckMeminfo(*meminfo);
  if (!cpus.ok()) return;
  if (cpus->count == 0) {
    DeviceMemoryProbe d = worker::MakeDeviceMemory(node, *meminfo);
    FUZZ_CHECK(d.total_bytes >= d.free_bytes && d.free_bytes >= 0);
    return;
  }
  const int64_t huge = worker::HugepagesBytes(*meminfo, per_size, default_size);
  CheckSocket(worker::MakeSocket(node, *cpus, *meminfo, huge), *meminfo);
}

}  // namespace trellis::fuzz
