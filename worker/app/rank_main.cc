// trellis-rank: one rank of a [model] run. The agent (trellis-worker) starts it
// with the rank's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
// TRELLIS_STEP_SOCKET, ...); it runs trainer_core in this process. Exit code
// (common/exit_codes.h): 0 trained to the end, 1 training error, kExitUsage (2)
// an unreadable spec or not a [model] run.

#include <CLI/CLI.hpp>

#include "common/exit_codes.h"
#include "common/log.h"
#include "trainer_core/host/rank_host.h"
#include "worker/app/spec_file.h"

using trellis::kExitUsage;

int main(int argc, char** argv) {
  CLI::App app{
      "trellis-rank: one rank of a Trellis [model] run, trainer_core in this process, configured "
      "by <run-dir>/spec.toml and the rank's environment, as trellis-worker starts it"};
  std::string run_dir;
  std::string log_level = "info";
  app.add_option("--run-dir", run_dir, "Run directory holding spec.toml")->required();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  CLI11_PARSE(app, argc, argv);
  trellis::InitLogging("trellis-rank", log_level);

  auto spec = trellis::worker::LoadSpec(run_dir);
  if (!spec.ok()) {
    spdlog::error("{}", std::string(spec.status().message()));
    return kExitUsage;
  }
  if (!spec->has_model) {
    spdlog::error("{}/spec.toml has no [model] section: trellis-rank runs only [model] runs",
                  run_dir);
    return kExitUsage;
  }
  return trellis::train::RunHostedRank(spec->trainer);
}
