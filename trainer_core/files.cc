#include "trainer_core/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "trainer_core/error.h"

namespace trellis::train {
namespace {

bool Stat(const std::string& path, struct stat* st) { return ::stat(path.c_str(), st) == 0; }

std::string Why() { return std::strerror(errno); }

}  // namespace

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string DirName(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return Stat(path, &st) && S_ISDIR(st.st_mode);
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return Stat(path, &st) && S_ISREG(st.st_mode);
}

bool PathExists(const std::string& path) {
  struct stat st;
  return Stat(path, &st);
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return Stat(path, &st) ? static_cast<int64_t>(st.st_size) : -1;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> ListFilesRecursive(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& name : ListDir(dir)) {
    const std::string path = JoinPath(dir, name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      auto sub = ListFilesRecursive(path);
      files.insert(files.end(), sub.begin(), sub.end());
    } else if (S_ISREG(st.st_mode)) {
      files.push_back(path);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

void MakeDirs(const std::string& path) {
  if (path.empty() || IsDirectory(path)) return;
  MakeDirs(DirName(path));
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    throw TrainError(path + ": cannot create directory: " + Why());
}

void RenamePath(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw TrainError(to + ": cannot rename " + from + " into place: " + Why());
}

void RemoveTree(const std::string& path) {
  if (!PathExists(path)) return;
  auto remove_one = [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); };
  if (::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
    throw TrainError(path + ": cannot remove: " + Why());
}

namespace {

// The path `fd` was opened as, links resolved; empty when it cannot be read.
std::string OpenedPath(int fd) {
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  std::string target(4096, '\0');
  const ssize_t n = ::readlink(link.c_str(), target.data(), target.size());
  if (n <= 0 || static_cast<size_t>(n) >= target.size()) return "";
  target.resize(static_cast<size_t>(n));
  return target;
}

bool IsUnder(const std::string& path, const std::string& root) {
  if (root == "/") return !path.empty() && path[0] == '/';
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

}  // namespace

namespace {

// An open descriptor, closed when this goes; moved, never copied.
struct Descriptor {
  explicit Descriptor(int open_fd) : fd(open_fd) {}
  Descriptor(Descriptor&& other) noexcept : fd(other.fd) { other.fd = -1; }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
  int fd;
};

// Opens `path` read-only and checks the file as opened against `roots`
// (ReadFileUnderRoots says how); its size in `*size`.
Descriptor OpenUnderRoots(const std::string& path, const std::vector<std::string>& roots,
                          const std::string& head, size_t* size) {
  Descriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) throw TrainError(head + ": cannot open: " + Why());
  if (!roots.empty()) {
    const std::string opened = OpenedPath(file.fd);
    std::string listed;
    bool under = false;
    for (const auto& root : roots) {
      listed += (listed.empty() ? "" : ", ") + root;
      char* resolved = ::realpath(root.c_str(), nullptr);
      if (resolved == nullptr) continue;  // a root that is gone holds nothing
      under = under || (!opened.empty() && IsUnder(opened, resolved));
      std::free(resolved);
    }
    if (!under)
      throw RefusedInput(head + " (opened as " + (opened.empty() ? "?" : opened) +
                         ") is not under a data root of this controller (" + listed +
                         "); checked by the rank on the file it opened");
  }
  struct stat st;
  if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw TrainError(head + ": not a regular file");
  *size = static_cast<size_t>(st.st_size);
  return file;
}

}  // namespace

std::string ReadFileUnderRoots(const std::string& path, const std::vector<std::string>& roots,
                               const std::string& what) {
  const std::string head = what + " " + path;
  size_t size = 0;
  const Descriptor file = OpenUnderRoots(path, roots, head, &size);
  std::string bytes;
  bytes.reserve(size);
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(file.fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw TrainError(head + ": cannot read: " + Why());
    }
    bytes.append(buf, static_cast<size_t>(n));
  }
  return bytes;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
}

void MappedFile::ReadInOrder(bool in_order) const {
  // Advice only: where the kernel declines it, reads are as fast as before.
  if (data_ != nullptr)
    ::madvise(const_cast<char*>(data_), size_, in_order ? MADV_SEQUENTIAL : MADV_NORMAL);
}

std::shared_ptr<const MappedFile> MapFileUnderRoots(const std::string& path,
                                                    const std::vector<std::string>& roots,
                                                    const std::string& what) {
  const std::string head = what + " " + path;
  size_t size = 0;
  const Descriptor file = OpenUnderRoots(path, roots, head, &size);
  if (size == 0) return std::shared_ptr<const MappedFile>(new MappedFile(nullptr, 0));
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, file.fd, 0);
  if (data == MAP_FAILED) throw TrainError(head + ": cannot map: " + Why());
  // The mapping outlives the descriptor.
  return std::shared_ptr<const MappedFile>(new MappedFile(static_cast<const char*>(data), size));
}

std::string MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = JoinPath(tmp != nullptr && *tmp ? tmp : "/tmp", prefix + "-XXXXXX");
  if (::mkdtemp(templ.data()) == nullptr)
    throw TrainError(templ + ": cannot create temporary directory: " + Why());
  return templ;
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

}  // namespace trellis::train
