#include "common/checkpoint_layout.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace trellis {

std::optional<int64_t> ParseCheckpointStepDir(const std::string& name) {
  static const std::string kPrefix = "step-";
  if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0 ||
      name.size() > kPrefix.size() + 18)
    return std::nullopt;
  int64_t step = 0;
  for (size_t i = kPrefix.size(); i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

int64_t NewestCompleteCheckpoint(const std::string& dir) {
  const std::vector<int64_t> steps = CompleteCheckpoints(dir);
  return steps.empty() ? -1 : steps.back();
}

std::vector<int64_t> CompleteCheckpoints(const std::string& dir) {
  std::vector<int64_t> steps;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return steps;
  while (const dirent* e = ::readdir(d.get())) {
    auto step = ParseCheckpointStepDir(e->d_name);
    struct stat st;
    if (step && ::stat((dir + "/" + e->d_name + "/manifest.json").c_str(), &st) == 0 &&
        S_ISREG(st.st_mode))
      steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string CheckpointStepDir(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return dir + "/" + name;
}

std::string SetAsideCheckpointStep(const std::string& dir, int64_t step, std::string* error) {
  const std::string from = CheckpointStepDir(dir, step);
  const std::string base = dir + "/damaged-" + from.substr(dir.size() + 1);
  for (int n = 1; n < 1000; ++n) {
    const std::string to = n == 1 ? base : base + "." + std::to_string(n);
    struct stat st;
    if (::lstat(to.c_str(), &st) == 0) continue;  // set aside before: keep both
    if (::rename(from.c_str(), to.c_str()) == 0) return to;
    *error = "cannot rename " + from + " to " + to + ": " + std::strerror(errno);
    return "";
  }
  *error = "cannot set " + from + " aside: " + base + " .. .999 all exist";
  return "";
}

std::string DescribeSteps(const std::vector<int64_t>& steps, size_t most) {
  if (steps.empty()) return "none";
  const size_t first = steps.size() > most ? steps.size() - most : 0;
  std::string out = first > 0 ? "..., " : "";
  for (size_t i = first; i < steps.size(); ++i)
    out += (i > first ? ", " : "") + std::to_string(steps[i]);
  if (first > 0) out += " (" + std::to_string(steps.size()) + " in all)";
  return out;
}

}  // namespace trellis
