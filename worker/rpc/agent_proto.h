#pragma once
// The only place the worker converts between proto and its own types. The
// shapes it shares with the controller (StepRecord, NodeProbe) are converted
// in proto/ (step_record_proto, node_probe_proto); the worker's calls reach them by argument-dependent
// lookup (the types live in namespace trellis).

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "proto/node_probe_proto.h"
#include "proto/step_record_proto.h"
#include "trellis/v1/agent.pb.h"
#include "worker/core/outcome.h"
#include "worker/core/rank_layout.h"

namespace trellis::worker {

void ToProto(const RankExit& in, v1::RankExit* out);
GoDecision GoFromProto(const v1::GateDecision& in);
absl::Status FromGrpc(const grpc::Status& status);

}  // namespace trellis::worker
