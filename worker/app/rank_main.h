#pragma once
// `trellis-worker rank`: one rank of a [model] run. The agent starts it with
// the rank's environment (RANK, WORLD_SIZE, MASTER_ADDR, TRELLIS_STEP_SOCKET,
// ...); it runs trainer_core in this process.

#include <string>

namespace trellis::worker {

// True when this binary was built with trainer_core (LibTorch).
bool HostsTrainer();

// Returns the exit code: 0 trained to the end, 1 training error, 2 a spec
// that is unreadable or not a [model] run, or a worker without trainer_core.
int RunRank(const std::string& run_dir);

}  // namespace trellis::worker
