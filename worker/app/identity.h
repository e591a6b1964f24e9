#pragma once
// The WorkerIdentity every call carries, from the flags and the secret file.

#include "absl/status/statusor.h"
#include "trellis/v1/agent.pb.h"
#include "worker/core/args.h"

namespace trellis::worker {

absl::StatusOr<v1::WorkerIdentity> LoadIdentity(const IdentityArgs& args);

}  // namespace trellis::worker
