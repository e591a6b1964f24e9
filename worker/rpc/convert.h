#pragma once
// The only place the worker converts between proto and its own types.

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "common/step_record.h"
#include "trellis/v1/agent.pb.h"
#include "worker/core/memory_probe.h"
#include "worker/core/outcome.h"
#include "worker/core/rank_layout.h"

namespace trellis::worker {

void ToProto(const StepRecord& in, v1::StepRecord* out);
void ToProto(const RankExit& in, v1::RankExit* out);
void ToProto(const NodeProbeReport& in, v1::NodeProbe* out);
GoDecision GoFromProto(const v1::GateDecision& in);
absl::Status FromGrpc(const grpc::Status& status);

}  // namespace trellis::worker
