#pragma once
// Unary calls of AgentService with bounded retries while the controller is
// unreachable (it may be restarting): each waits for the channel to connect,
// so the call goes out as soon as the controller is back. Blocking; used
// before and after the worker's event loop runs.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/node_probe.h"
#include "trellis/v1/agent.grpc.pb.h"
#include "worker/core/args.h"
#include "worker/core/outcome.h"
#include "worker/core/rank_layout.h"
#include "worker/core/retry.h"
#include "worker/rpc/call_retry.h"
#include "worker/rpc/controller_link.h"

namespace trellis::worker {

struct NodeFacts {
  std::string version;
  std::string hostname;
  int gpus = 0;
  int cpus = 0;
  NodeProbe probe;  // per-socket host memory, or the probe's error
  // SLURM_JOB_ID and SLURM_STEP_ID of the worker's environment (empty outside Slurm).
  std::string slurm_job_id = {};
  std::string slurm_step_id = {};
  // host:port of this worker's /metrics; empty when metrics are off.
  std::string metrics_addr = {};
};

struct GateResult {
  enum Kind { kGo, kAbort, kStandby } kind = kAbort;
  std::string reason;
  GoDecision go;  // kGo only
};

class AgentClient {
 public:
  // `clock` times the retries' window and backoff. Each try goes to the
  // link's address of the moment: one that moved is followed between tries.
  AgentClient(std::shared_ptr<ControllerLink> link, v1::WorkerIdentity id, Clock& clock,
              BackoffPolicy backoff = {});

  // Retries UNAVAILABLE for at most retry_window; each call may wait up to
  // gate_wait for the gate to decide. Refusals keep the controller's code
  // and message (FAILED_PRECONDITION on a version mismatch, ...).
  absl::StatusOr<GateResult> Register(const NodeFacts& facts, Seconds retry_window,
                                      Seconds gate_wait);
  // The final report. oom_kills: the job cgroup's OOM kills during the
  // launch, -1 when unknown. `planned_stop`: ReportExitRequest.planned_stop
  // ("time_limit" or empty).
  v1::ReportExitRequest FinalReport(const std::vector<RankExit>& exits,
                                    const WorkerOutcome& outcome, int oom_kills,
                                    const std::string& planned_stop) const;
  absl::Status ReportExit(const v1::ReportExitRequest& report, Seconds timeout);
  absl::StatusOr<NextLaunchChoice> NextLaunch(const NextLaunchAsk& ask, Seconds timeout);

  const std::shared_ptr<ControllerLink>& link() const { return link_; }
  const v1::WorkerIdentity& id() const { return id_; }

 private:
  grpc::Status WithRetries(const char* what, const RetryLimits& limits,
                           const std::function<grpc::Status(Seconds)>& call);

  std::shared_ptr<ControllerLink> link_;
  v1::WorkerIdentity id_;
  Clock& clock_;
  BackoffPolicy backoff_;
};

}  // namespace trellis::worker
