#pragma once
// The only place that converts between proto messages and controller types.
// The shapes the controller shares with workers (StepRecord, NodeProbe) are
// converted in proto/ (step_record_proto, node_probe_proto); what a worker
// sends is bounded here.

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "controller/app/views.h"
#include "controller/app/worker_reports.h"
#include "proto/node_probe_proto.h"
#include "proto/step_record_proto.h"
#include "trellis/v1/agent.pb.h"
#include "trellis/v1/controller.pb.h"

namespace trellis::controller {

grpc::Status ToGrpc(const absl::Status& status);
v1::RunState ToProto(RunState state);
void ToProto(const RunView& view, v1::RunSummary* out);
void ToProto(const RunView& view, v1::Run* out);
void ToProto(const EventRecord& event, v1::RunEvent* out);
void ToProto(const StepRow& step, v1::StepSummary* out);
void ToProto(const LaunchRecord& launch, v1::Launch* out);
void ToProto(const HealthEventRecord& event, v1::HealthEvent* out);
void ToProto(const RankLatest& rank, v1::RankLatest* out);
void ToProto(const GateAnswer& answer, v1::GateDecision* out);
void ToProto(const NextLaunchAnswer& answer, v1::NextLaunchResponse* out);
WorkerId FromProto(const v1::WorkerIdentity& id);
// `node`: the reporting worker's node (from its identity).
RankExitInfo FromProto(const v1::RankExit& r, const std::string& node);
// A worker's final report (checked before: validate.h), its texts bounded.
WorkerReport FromProto(const v1::ReportExitRequest& req);
// A worker's probe, its error bounded (the counts are checked before, in Register).
NodeProbe ProbeFromWorker(const v1::NodeProbe& probe);
void ToProto(const NodeStatusView& node, WallTime now, v1::NodeStatus* out);
void ToProto(const GateReportView& report, v1::GateReportResponse* out);

}  // namespace trellis::controller
