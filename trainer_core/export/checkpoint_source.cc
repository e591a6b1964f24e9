#include "trainer_core/export/checkpoint_source.h"

#include <cstdlib>
#include <filesystem>

#include "common/checkpoint_layout.h"
#include "trainer_core/error.h"
#include "trainer_core/files.h"

namespace trellis::train {

CheckpointSource ResolveCheckpointSource(const std::string& arg) {
  namespace fs = std::filesystem;
  const size_t at = arg.rfind('@');
  std::string path = at == std::string::npos ? arg : arg.substr(0, at);
  const std::string step_text = at == std::string::npos ? "" : arg.substr(at + 1);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty()) throw TrainError("\"" + arg + "\" names no checkpoint (PATH[@STEP])");
  if (!IsDirectory(path))
    throw TrainError(path + " is no directory (a run directory, its checkpoints/ or one "
                     "step-NNNNNNNN/; for a run of the controller: trellis export RUN OUT/)");
  auto parent = [](const std::string& p) {
    const std::string up = fs::path(p).parent_path().string();
    return up.empty() ? std::string(".") : up;
  };
  CheckpointSource src;
  src.dir = path;
  int64_t step_of_dir = -1;
  const std::string base = fs::path(path).filename().string();
  if (auto step = ParseCheckpointStepDir(base)) {  // one step's directory
    src.dir = parent(path);
    step_of_dir = *step;
  } else if (IsDirectory(JoinPath(path, "checkpoints"))) {  // a run directory
    src.dir = JoinPath(path, "checkpoints");
  }
  const std::vector<int64_t> complete = CompleteCheckpoints(src.dir);
  if (step_text.empty() || step_text == "latest") {
    src.step = step_of_dir >= 0 && step_text.empty() ? step_of_dir
               : complete.empty()                    ? -1
                                                     : complete.back();
    if (src.step < 0)
      throw TrainError(src.dir + " holds no complete checkpoint (no step-NNNNNNNN/ with its "
                       "manifest.json)");
  } else {
    char* end = nullptr;
    const long long n = std::strtoll(step_text.c_str(), &end, 10);
    if (*end != '\0' || n < 0)
      throw TrainError("\"" + step_text + "\" after '@' is not a step number or latest");
    src.step = n;
  }
  bool found = false;
  for (int64_t s : complete) found = found || s == src.step;
  if (!found)
    throw TrainError(src.dir + " has no complete checkpoint of step " +
                     std::to_string(src.step) + "; its complete steps: " +
                     DescribeSteps(complete));
  const std::string beside = JoinPath(parent(src.dir), "spec.toml");
  if (PathExists(beside)) src.spec_beside = beside;
  return src;
}

}  // namespace trellis::train
