#include "worker/io/cgroup_oom.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>

#include "common/log.h"

namespace trellis::worker {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return s.str();
}

bool ListsMemory(std::string_view controllers) {
  while (!controllers.empty()) {
    size_t comma = controllers.find(',');
    if (controllers.substr(0, comma) == "memory") return true;
    if (comma == std::string_view::npos) break;
    controllers.remove_prefix(comma + 1);
  }
  return false;
}

// The nearest ancestor (or self) named job_*, else `path` itself.
std::string JobCgroup(const std::string& path) {
  for (size_t end = path.size(); end > 0;) {
    size_t slash = path.rfind('/', end - 1);
    size_t begin = slash == std::string::npos ? 0 : slash + 1;
    if (path.compare(begin, 4, "job_") == 0) return path.substr(0, end);
    if (slash == std::string::npos) break;
    end = slash;
  }
  return path;
}

// "oom_kill N" among "key value" lines (v1's oom_control also has oom_kill_disable).
std::optional<int64_t> ParseOomKill(std::string_view text) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    constexpr std::string_view kKey = "oom_kill ";
    if (line.substr(0, kKey.size()) != kKey) continue;
    std::string_view value = line.substr(kKey.size());
    int64_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || n < 0) return std::nullopt;
    return n;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> ReadJobOomKills(const std::string& root) {
  auto self = ReadFile(root + "/proc/self/cgroup");
  if (!self) {
    spdlog::debug("OOM kills not counted: cannot read {}/proc/self/cgroup", root);
    return std::nullopt;
  }
  std::optional<std::string> v1, v2;
  std::istringstream lines(*self);
  for (std::string line; std::getline(lines, line);) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string_view controllers = std::string_view(line).substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) v2 = path;
    if (ListsMemory(controllers)) v1 = path;
  }
  // A hybrid system lists both; its memory controller is the v1 one.
  std::string counter;
  if (v1) {
    counter = root + "/sys/fs/cgroup/memory" + JobCgroup(*v1) + "/memory.oom_control";
  } else if (v2) {
    counter = root + "/sys/fs/cgroup" + JobCgroup(*v2) + "/memory.events";
  } else {
    spdlog::debug("OOM kills not counted: no memory cgroup in {}/proc/self/cgroup", root);
    return std::nullopt;
  }
  auto text = ReadFile(counter);
  std::optional<int64_t> n = text ? ParseOomKill(*text) : std::nullopt;
  if (!n) spdlog::debug("OOM kills not counted: no oom_kill line in {}", counter);
  return n;
}

int OomKillsBetween(std::optional<int64_t> before, std::optional<int64_t> after) {
  if (!before || !after || *after < *before) return -1;
  return static_cast<int>(std::min<int64_t>(*after - *before, std::numeric_limits<int>::max()));
}

}  // namespace trellis::worker
