#include "common/checkpoint_layout.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cctype>
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
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return -1;
  int64_t newest = -1;
  while (const dirent* e = ::readdir(d.get())) {
    auto step = ParseCheckpointStepDir(e->d_name);
    struct stat st;
    if (step && *step > newest &&
        ::stat((dir + "/" + e->d_name + "/manifest.json").c_str(), &st) == 0 &&
        S_ISREG(st.st_mode))
      newest = *step;
  }
  return newest;
}

}  // namespace trellis
