#pragma once
// The Slurm commands of effects.h carried out on the Slurm thread (the
// commands block), each answered with the message its part waits for, or
// nothing where a failure is only logged.

#include <variant>

#include "controller/app/effects.h"
#include "controller/slurm/slurm_client.h"

namespace trellis::controller {

using SlurmAnswer =
    std::variant<std::monostate, NodesListed, JobSubmitted, RunJobCancelled, JobsSeen, JobShown>;

// Whether `command` is one of the Slurm calls.
bool IsSlurmCall(const Command& command);
// Runs one Slurm call (IsSlurmCall); blocks.
SlurmAnswer CallSlurm(SlurmClient& slurm, const Command& call);

}  // namespace trellis::controller
