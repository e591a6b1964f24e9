#include "worker/io/node_info.h"

#include <sched.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <thread>

extern char** environ;

namespace trellis::worker {

int CountGpus(const std::string& dev_dir) {
  std::error_code ec;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dev_dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.size() <= 6 || name.compare(0, 6, "nvidia") != 0) continue;
    bool digits = true;
    for (size_t i = 6; i < name.size(); ++i)
      digits = digits && std::isdigit(static_cast<unsigned char>(name[i]));
    if (digits) ++count;
  }
  return count;
}

int CountCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::string SelfExecutable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "/proc/self/exe";
}

std::string DefaultNodeName() {
  const char* slurm = std::getenv("SLURMD_NODENAME");
  if (slurm != nullptr && *slurm != '\0') return slurm;
  return Hostname();
}

std::string FindExecutable(const std::string& name, const std::string& path_env) {
  size_t start = 0;
  while (start <= path_env.size()) {
    size_t end = path_env.find(':', start);
    if (end == std::string::npos) end = path_env.size();
    const std::string dir = path_env.substr(start, end - start);
    if (!dir.empty()) {
      const std::string candidate = dir + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0 && !std::filesystem::is_directory(candidate))
        return candidate;
    }
    start = end + 1;
  }
  return "";
}

EnvMap CurrentEnvironment() {
  EnvMap env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

}  // namespace trellis::worker
