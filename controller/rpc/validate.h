#pragma once
// The bounds of every request field of the agent API (workers) and the user
// API, checked at the edge before anything is looked up or stored: a bad
// field ends the call INVALID_ARGUMENT with a message that starts with the
// field's name and says what is accepted. Pure. Batches of step records are
// checked whole by CheckBatch (controller/core/step_batch.h) and answered
// REFUSED instead, so that the stream goes on.

#include <grpcpp/grpcpp.h>

#include <string>
#include <string_view>

#include "trellis/v1/agent.pb.h"
#include "trellis/v1/controller.pb.h"

namespace trellis::controller {

inline constexpr int kMaxAttempt = 1000000;  // attempts and launches of one run
// RunStepsRequest.max_points: 0 asks for the default; more than the most is
// refused rather than cut, so a caller learns the bound.
inline constexpr int kDefaultStepPoints = 2000;
inline constexpr int kMaxStepPoints = 100000;
inline constexpr int kDefaultListRuns = 100;
inline constexpr int kMaxListRuns = 10000;
inline constexpr int kMaxRanksPage = 4096;  // GetRunRequest.ranks_limit
// A worker's own text (ReportExit's reason, a probe's error) is stored cut to
// 1024 bytes; far more is refused.
inline constexpr size_t kMaxWorkerText = 4096;

// A run id as the controller makes them: "<name>-<seq>", [a-z0-9-], 1 to 96.
grpc::Status CheckRunId(const std::string& run_id, std::string_view field = "run_id");

// --- agent API ---
grpc::Status Check(const v1::WorkerIdentity& id);
grpc::Status Check(const v1::RegisterRequest& req);
// The identity and a heartbeat or rank exit; a batch's records are CheckBatch's.
grpc::Status Check(const v1::AgentReport& report);
grpc::Status Check(const v1::ReportExitRequest& req);
grpc::Status Check(const v1::NextLaunchRequest& req);
grpc::Status Check(const v1::StandByRequest& req);

// --- user API ---
grpc::Status Check(const v1::SubmitRunRequest& req);
grpc::Status Check(const v1::DoctorRequest& req);
grpc::Status Check(const v1::GetRunRequest& req);
grpc::Status Check(const v1::ListRunsRequest& req);
grpc::Status Check(const v1::CancelRunRequest& req);
grpc::Status Check(const v1::WatchRunRequest& req);
grpc::Status Check(const v1::ReadLogsRequest& req);
grpc::Status Check(const v1::QuarantineNodeRequest& req);
grpc::Status Check(const v1::ReleaseNodeRequest& req);
grpc::Status Check(const v1::GateReportRequest& req);
grpc::Status Check(const v1::RunStepsRequest& req);

}  // namespace trellis::controller
