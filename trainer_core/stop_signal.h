#pragma once
// Slurm's wall-time warning, as the worker passes it on to every rank
// (SIGUSR1; README, "Time limits"): the trainer stops at its next step
// boundary with a checkpoint (TrainerOptions::stop_requested).

namespace trellis::train {

// Installs the SIGUSR1 handler (before anything slow, so that a warning
// during start-up does not kill the process).
void InstallStopSignal();
// True once SIGUSR1 arrived.
bool StopSignalled();

}  // namespace trellis::train
