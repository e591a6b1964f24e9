#include "worker/app/rank_main.h"

#include "common/log.h"
#include "worker/app/agent.h"
#include "worker/app/spec_file.h"

#ifdef TRELLIS_WORKER_HOSTS_TRAINER
#include "trainer_core/host/rank_host.h"
#endif

namespace trellis::worker {

bool HostsTrainer() {
#ifdef TRELLIS_WORKER_HOSTS_TRAINER
  return true;
#else
  return false;
#endif
}

int RunRank(const std::string& run_dir) {
  auto spec = LoadSpec(run_dir);
  if (!spec.ok()) {
    spdlog::error("{}", std::string(spec.status().message()));
    return kExitUsage;
  }
  if (!spec->has_model) {
    spdlog::error("{}/spec.toml has no [model] section: `rank` runs only [model] runs", run_dir);
    return kExitUsage;
  }
#ifdef TRELLIS_WORKER_HOSTS_TRAINER
  return train::RunHostedRank(spec->trainer);
#else
  spdlog::error("this trellis-worker was built without trainer_core (LibTorch not found at build "
                "time), so it cannot run [model] runs");
  return kExitUsage;
#endif
}

}  // namespace trellis::worker
