#include "worker/io/sysfs_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace trellis::worker {
namespace {

// More NUMA nodes than any machine has (Linux's MAX_NUMNODES is 1024).
constexpr size_t kMaxNodes = 1024;

std::string NodeBase(const std::string& root) { return root + "/devices/system/node"; }

// At most kMaxSysfsFileBytes + 1 bytes, so that the parser can refuse a larger file.
absl::StatusOr<std::string> ReadBounded(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot read " + path);
  std::string text(kMaxSysfsFileBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status st = ErrnoStatus("cannot read " + path);
      ::close(fd);
      return st;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Names of the entries of `dir` (no "." or ".."); NotFound when it is absent.
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return absl::NotFoundError(dir + " does not exist");
    return ErrnoStatus("cannot list " + dir);
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// The N of every nodeN directory, ascending (other entries such as `online`
// or `power` are skipped).
absl::StatusOr<std::vector<int>> NodeIds(const std::string& root) {
  const std::string base = NodeBase(root);
  auto names = ListDir(base);
  if (!names.ok()) return absl::FailedPreconditionError(std::string(names.status().message()));
  std::vector<int> ids;
  for (const std::string& name : *names) {
    int id = 0;
    if (name.size() < 5 || name.compare(0, 4, "node") != 0 ||
        name.find_first_not_of("0123456789", 4) != std::string::npos ||
        !absl::SimpleAtoi(name.substr(4), &id) || !IsDirectory(base + "/" + name))
      continue;
    ids.push_back(id);
  }
  if (ids.empty()) return absl::FailedPreconditionError("no nodeN directories under " + base);
  if (ids.size() > kMaxNodes)
    return absl::FailedPreconditionError(
        absl::StrCat(base, " has ", ids.size(), " nodes; at most ", kMaxNodes, " are read"));
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::StatusOr<CpuList> ReadCpulist(const std::string& node_dir) {
  const std::string path = node_dir + "/cpulist";
  ASSIGN_OR_RETURN(std::string text, ReadBounded(path));
  return ParseCpulist(text, path);
}

// nodeN/hugepages/hugepages-<size>kB/nr_hugepages: page size -> count. Empty
// when the kernel has no such directory (no hugetlb support).
absl::StatusOr<std::map<int64_t, int64_t>> ReadNodeHugepages(const std::string& node_dir) {
  std::map<int64_t, int64_t> per_size;
  const std::string dir = node_dir + "/hugepages";
  auto names = ListDir(dir);
  if (absl::IsNotFound(names.status())) return per_size;
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    auto size = ParseHugepageDirName(name);
    if (!size.ok()) continue;
    const std::string path = dir + "/" + name + "/nr_hugepages";
    ASSIGN_OR_RETURN(std::string text, ReadBounded(path));
    int64_t count = 0;
    if (text.empty() || text.back() != '\n' || text.size() > 21 ||
        text.find_first_not_of("0123456789") != text.size() - 1 ||
        !absl::SimpleAtoi(text.substr(0, text.size() - 1), &count))
      return absl::InvalidArgumentError(path + ": expected a page count and a newline");
    per_size[*size] = count;
  }
  return per_size;
}

// The size HugePages_Total counts in, see ProbeNode's comment.
int64_t DefaultHugepageSize(const std::string& root) {
  auto names = ListDir(root + "/kernel/mm/hugepages");
  if (!names.ok()) return kDefaultHugepageBytes;
  std::vector<int64_t> sizes;
  for (const std::string& name : *names)
    if (auto size = ParseHugepageDirName(name); size.ok()) sizes.push_back(*size);
  return sizes.size() == 1 ? sizes[0] : kDefaultHugepageBytes;
}

}  // namespace

absl::StatusOr<NodeProbe> ProbeNode(const std::string& sysfs_root) {
  ASSIGN_OR_RETURN(std::vector<int> ids, NodeIds(sysfs_root));
  NodeProbe result;
  for (int id : ids) {
    const std::string dir = absl::StrCat(NodeBase(sysfs_root), "/node", id);
    const std::string meminfo_path = dir + "/meminfo";
    ASSIGN_OR_RETURN(std::string meminfo_text, ReadBounded(meminfo_path));
    ASSIGN_OR_RETURN(NodeMeminfo meminfo, ParseNodeMeminfo(meminfo_text, id, meminfo_path));
    ASSIGN_OR_RETURN(CpuList cpus, ReadCpulist(dir));
    if (cpus.count == 0) {
      result.device_nodes.push_back(MakeDeviceMemory(id, meminfo));
      continue;
    }
    ASSIGN_OR_RETURN(auto per_size, ReadNodeHugepages(dir));
    const int64_t default_size = per_size.empty() && meminfo.hugepages_total > 0
                                     ? DefaultHugepageSize(sysfs_root)
                                     : kDefaultHugepageBytes;
    result.sockets.push_back(
        MakeSocket(id, cpus, meminfo, HugepagesBytes(meminfo, per_size, default_size)));
  }
  if (result.sockets.empty())
    return absl::FailedPreconditionError("no NUMA node with CPUs under " + NodeBase(sysfs_root));
  return result;
}

absl::StatusOr<std::vector<int>> SocketNodes(const std::string& sysfs_root) {
  ASSIGN_OR_RETURN(std::vector<int> ids, NodeIds(sysfs_root));
  std::vector<int> sockets;
  for (int id : ids) {
    ASSIGN_OR_RETURN(CpuList cpus, ReadCpulist(absl::StrCat(NodeBase(sysfs_root), "/node", id)));
    if (cpus.count > 0) sockets.push_back(id);
  }
  return sockets;
}

}  // namespace trellis::worker
