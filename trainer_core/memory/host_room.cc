#include "trainer_core/memory/host_room.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "trainer_core/files.h"

namespace trellis::train {
namespace {

constexpr int kMpolBind = 2;  // <linux/mempolicy.h>, without libnuma

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Under(const std::string& root, const std::string& path) {
  return root.empty() || root == "/" ? path : root + path;
}

std::string Gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

// A whole-number figure file (memory.max, memory.current); -1 for "max",
// absent or unreadable.
int64_t NumberFile(const std::string& path) {
  const std::string text = ReadSmallFile(path);
  long long v;
  if (text.empty() || std::sscanf(text.c_str(), "%lld", &v) != 1) return -1;
  return v;
}

// The memory cgroup's path from /proc/self/cgroup: v2's "0::/path", or
// v1's "N:...memory...:/path" (then `v1` is set).
std::string OwnCgroup(const std::string& text, bool* v1) {
  std::istringstream lines(text);
  std::string line, v2_path;
  while (std::getline(lines, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::istringstream names(controllers);
    std::string name;
    while (std::getline(names, name, ','))
      if (name == "memory") {
        *v1 = true;
        return path;
      }
    if (line.compare(0, 3, "0::") == 0) v2_path = path;
  }
  *v1 = false;
  return v2_path;
}

void AddCgroupBounds(const std::string& root, std::vector<MemoryBound>* out) {
  bool v1 = false;
  std::string path = OwnCgroup(ReadSmallFile(Under(root, "/proc/self/cgroup")), &v1);
  if (path.empty() || path[0] != '/') return;
  const std::string base = Under(root, v1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup");
  // v1 limits without one read as a huge number: above any machine's memory.
  constexpr int64_t kNoLimit = int64_t{1} << 60;
  while (true) {
    const std::string dir = base + (path == "/" ? "" : path);
    const int64_t limit = NumberFile(dir + (v1 ? "/memory.limit_in_bytes" : "/memory.max"));
    const int64_t used = NumberFile(dir + (v1 ? "/memory.usage_in_bytes" : "/memory.current"));
    if (limit > 0 && limit < kNoLimit && used >= 0) {
      const int64_t inactive_file = std::max<int64_t>(
          0, CgroupStat(ReadSmallFile(dir + "/memory.stat"),
                        v1 ? "total_inactive_file" : "inactive_file"));
      out->push_back({"cgroup " + path,
                      std::max<int64_t>(0, limit - used) + std::min(inactive_file, used), limit});
    }
    if (path == "/" || path.empty()) break;
    const size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

}  // namespace

int64_t MeminfoBytes(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  std::string line;
  const std::string want = key + ":";
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string word;
    // "MemFree: 123 kB" or "Node 0 MemFree: 123 kB".
    while (words >> word) {
      if (word != want) continue;
      long long kb;
      if (words >> kb) return static_cast<int64_t>(kb) * 1024;
      return -1;
    }
  }
  return -1;
}

int64_t CgroupStat(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  std::string name;
  long long value;
  while (lines >> name >> value)
    if (name == key) return value;
  return -1;
}

std::vector<MemoryBound> ReadMemoryBounds(const std::string& root,
                                          const std::vector<int>& bound_nodes) {
  std::vector<MemoryBound> out;
  if (!bound_nodes.empty()) {
    MemoryBound nodes{bound_nodes.size() == 1 ? "NUMA node " : "NUMA nodes ", 0, 0};
    bool read = true;
    for (size_t i = 0; i < bound_nodes.size(); ++i) {
      const std::string text = ReadSmallFile(Under(
          root, "/sys/devices/system/node/node" + std::to_string(bound_nodes[i]) + "/meminfo"));
      const int64_t total = MeminfoBytes(text, "MemTotal"), free = MeminfoBytes(text, "MemFree");
      if (total < 0 || free < 0) {
        read = false;
        break;
      }
      nodes.where += (i ? "," : "") + std::to_string(bound_nodes[i]);
      nodes.total += total;
      nodes.available += free + std::max<int64_t>(0, MeminfoBytes(text, "Inactive(file)"));
    }
    if (read) out.push_back(nodes);
  } else {
    const std::string text = ReadSmallFile(Under(root, "/proc/meminfo"));
    const int64_t total = MeminfoBytes(text, "MemTotal"),
                  available = MeminfoBytes(text, "MemAvailable");
    if (total >= 0 && available >= 0) out.push_back({"the host", available, total});
  }
  AddCgroupBounds(root, &out);
  return out;
}

std::vector<int> MemoryBindNodes() {
  int mode = 0;
  unsigned long mask[16] = {};  // 1024 nodes
  const unsigned long max_node = sizeof(mask) * 8;
  if (::syscall(SYS_get_mempolicy, &mode, mask, max_node, nullptr, 0) != 0 || mode != kMpolBind)
    return {};
  std::vector<int> nodes;
  for (unsigned long n = 0; n < max_node; ++n)
    if (mask[n / (8 * sizeof(unsigned long))] & (1ul << (n % (8 * sizeof(unsigned long)))))
      nodes.push_back(static_cast<int>(n));
  return nodes;
}

std::string WhyItDoesNotFit(int64_t bytes, const std::vector<MemoryBound>& bounds,
                            int64_t keep_free) {
  const MemoryBound* tightest = nullptr;
  int64_t tightest_left = 0;
  for (const auto& b : bounds) {
    const int64_t left = b.available - bytes * b.ranks;
    if (!tightest || left < tightest_left) {
      tightest = &b;
      tightest_left = left;
    }
  }
  if (!tightest || tightest_left >= keep_free) return "";
  const std::string taken =
      tightest->ranks > 1 ? std::to_string(tightest->ranks) + " ranks x " + Gib(bytes) : Gib(bytes);
  return tightest->where + " has " + Gib(tightest->available) + " available of " +
         Gib(tightest->total) + "; " + taken + " would leave less than " + Gib(keep_free) +
         " free";
}

std::vector<uint64_t> BoundKeys(const std::string& host, const std::vector<MemoryBound>& bounds) {
  std::vector<uint64_t> keys;
  for (const auto& b : bounds) {
    uint64_t h = 14695981039346656037ull;  // FNV-1a: the same on every rank's build
    for (const char c : host + '\n' + b.where)
      h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    keys.push_back(h == 0 ? 1 : h);
  }
  return keys;
}

void SetRanksSharing(const std::vector<uint64_t>& all, const std::vector<uint64_t>& mine,
                     std::vector<MemoryBound>* bounds) {
  for (size_t i = 0; i < mine.size() && i < bounds->size(); ++i)
    (*bounds)[i].ranks =
        std::max(1, static_cast<int>(std::count(all.begin(), all.end(), mine[i])));
}

void CopyRanks(const std::vector<MemoryBound>& counted, std::vector<MemoryBound>* bounds) {
  for (auto& b : *bounds) {
    b.ranks = 1;
    for (const auto& c : counted)
      if (c.where == b.where) b.ranks = c.ranks;
  }
}

std::vector<MemoryBound> ReadMemoryBoundsCounted(const std::vector<MemoryBound>& counted) {
  std::vector<MemoryBound> now = ReadMemoryBounds("", MemoryBindNodes());
  CopyRanks(counted, &now);
  return now;
}

}  // namespace trellis::train
