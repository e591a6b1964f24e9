#include "trainer_core/trainer_init.h"

#include <cstdlib>

#include "trainer_core/error.h"

namespace trellis::train {

InitSource CheckedInitSource(const spec::TrainerSpec& spec) {
  const std::string& from = spec.training.init_from;
  InitSource src;
  src.state = spec.training.init_state;
  const size_t at = from.rfind('@');
  src.dir = at == std::string::npos ? from : from.substr(0, at);
  const std::string step = at == std::string::npos ? "latest" : from.substr(at + 1);
  if (src.dir.empty())
    throw TrainError("training.init_from: \"" + from + "\" names no checkpoint directory "
                     "(DIR@STEP, DIR@latest or DIR)");
  if (step == "latest") {
    src.step = LatestCompleteStep(src.dir);
    if (src.step < 0)
      throw TrainError("training.init_from: no complete checkpoint in " + src.dir);
  } else {
    char* end = nullptr;
    const long long n = std::strtoll(step.c_str(), &end, 10);
    if (step.empty() || *end != '\0' || n < 0)
      throw TrainError("training.init_from: \"" + step + "\" after '@' is not a step number or "
                       "latest");
    src.step = n;
  }
  try {
    src.meta = CheckCheckpoint(src.dir, src.step, spec, src.match());
  } catch (const TrainError& e) {
    throw TrainError("training.init_from: " + std::string(e.what()));
  }
  return src;
}

NamedTensors InitStateOf(const NamedTensors& all, const std::string& init_state) {
  if (init_state != "weights") return all;
  NamedTensors out;
  for (const auto& named : all)
    if (named.first.rfind("param.", 0) == 0 || named.first.rfind("router_bias.", 0) == 0)
      out.push_back(named);
  return out;
}

}  // namespace trellis::train
