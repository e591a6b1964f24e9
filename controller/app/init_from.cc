#include "controller/app/init_from.h"

#include <cstdlib>

#include "absl/strings/str_join.h"
#include "common/checkpoint_layout.h"
#include "controller/app/spec_paths.h"

namespace trellis::controller {

namespace {

constexpr char kField[] = "training.init_from: ";

}  // namespace

absl::StatusOr<InitFromFound> ResolveInitFrom(const std::string& init_from, StoreView& store,
                                              const std::vector<std::string>& roots) {
  const size_t at = init_from.rfind('@');
  const std::string where = at == std::string::npos ? init_from : init_from.substr(0, at);
  const std::string step_text = at == std::string::npos ? "latest" : init_from.substr(at + 1);
  std::string dir, what, source_run;
  if (where.find('/') == std::string::npos) {
    auto run = store.GetRun(where);
    if (!run.ok())
      return absl::InvalidArgumentError(std::string(kField) + "\"" + where +
                                        "\" is no run of this controller (RUN@STEP, "
                                        "RUN@latest, or an absolute checkpoint DIR@STEP)");
    dir = run->run_dir + "/checkpoints";
    what = "run " + where;
    source_run = where;
  } else {
    if (where.front() != '/')
      return absl::InvalidArgumentError(std::string(kField) + "a checkpoint directory must be "
                                        "an absolute path, got \"" + where + "\"");
    bool under = false;
    for (const std::string& root : roots) under = under || IsUnderRoot(where, root);
    if (!under)
      return absl::InvalidArgumentError(std::string(kField) + where +
                                        " is under no data root nor the output root (" +
                                        absl::StrJoin(roots, ", ") + ")");
    dir = where;
    what = where;
  }
  const std::vector<int64_t> complete = CompleteCheckpoints(dir);
  int64_t step = -1;
  if (step_text == "latest") {
    if (complete.empty())
      return absl::InvalidArgumentError(std::string(kField) + what + " has no complete "
                                        "checkpoint (in " + dir + ")");
    step = complete.back();
  } else {
    char* end = nullptr;
    const long long n = std::strtoll(step_text.c_str(), &end, 10);
    if (step_text.empty() || *end != '\0' || n < 0)
      return absl::InvalidArgumentError(std::string(kField) + "\"" + step_text +
                                        "\" after '@' is not a step number or latest");
    step = n;
    bool found = false;
    for (int64_t s : complete) found = found || s == step;
    if (!found)
      return absl::InvalidArgumentError(std::string(kField) + what + " has no complete "
                                        "checkpoint of step " + step_text + "; its complete "
                                        "steps: " + DescribeSteps(complete));
  }
  return InitFromFound{dir, step, source_run};
}

}  // namespace trellis::controller
