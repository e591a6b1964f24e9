#pragma once
// What the controller hands to its API layer (converted to proto in rpc/).

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/step_record.h"
#include "controller/app/gate_json.h"
#include "controller/core/failure_class.h"
#include "controller/core/goodput.h"
#include "controller/core/hang_timeout.h"
#include "controller/core/quarantine.h"
#include "controller/core/rank_latest.h"
#include "controller/store/records.h"

namespace trellis::controller {

struct RunView {
  RunRecord run;
  std::vector<AttemptRecord> attempts;
  std::vector<EventRecord> events;
  std::vector<StepRow> recent_steps;
  std::vector<LaunchRecord> launches;
  std::vector<HealthEventRecord> health_events;  // the newest
  std::vector<PoolJobRecord> pool_jobs;          // oldest first
  int64_t last_step = -1;
  double last_loss = 0;
  // In spools not yet stored (step_spools.h).
  int64_t unstored_step_records = 0;
  // GetRun and WatchRun's snapshot only (ListRuns leaves it out): the run's
  // time since submission by category, to now.
  std::optional<Goodput> goodput;
  // GetRun with RanksQuery::include only; none when the controller holds no
  // set for the run.
  std::optional<RankLatestPage> ranks;
  // GetRun only: the running launch's hang timeout (hang_timeout.h).
  std::optional<TimeoutInForce> hang_timeout;
};

// Which page of a run's latest per-rank records GetRun adds to its view.
struct RanksQuery {
  bool include = false;
  int from = 0;   // the lowest rank
  int limit = 0;  // 0 or above kMaxRanksPerPage: kMaxRanksPerPage
};

struct SubmitResult {
  std::string run_id;                    // empty on dry run
  std::string batch_script;              // dry run only
  std::vector<std::string> sbatch_args;  // dry run only
  std::string gate_policy_json;          // dry run only (gate_json.h)
  std::vector<std::string> pool_sbatch_args{};  // dry run with a spare pool only
  std::string resolved_spec{};                  // dry run only (spec_writer.h)
};

// A rank's exit as the controller keeps it (one definition: RankEnd of
// controller/core/failure_class.h).
using RankExitInfo = RankEnd;

// The srun step a worker runs in (from its environment; empty outside Slurm).
struct SlurmStep {
  std::string job_id;
  std::string step_id;
};

// Who is calling, from the worker's side of the API.
struct WorkerId {
  std::string run_id;
  int attempt = 0;
  int launch = 0;
  std::string node;
  std::string secret;
};

struct GateAnswer {
  enum Kind { kGo, kAbort, kStandby } kind = kAbort;
  std::string reason;
  int node_index = -1;
  int rank_offset = -1;
  int ranks_per_node = 0;
  int world_size = 0;
  std::string master_addr;
  int master_port = 0;
  int64_t resume_step = -1;
  std::string checkpoint_dir;
  std::vector<std::string> data_roots;  // the controller's --data-root
  // The GO nodes' mean time between failures together (RunMtbfFor,
  // controller/core/failure_rate.h), and how it was found.
  double mtbf_s = 0;
  std::string mtbf_basis;

  static GateAnswer Abort(std::string why) {
    GateAnswer a;
    a.reason = std::move(why);
    return a;
  }
};

// The batch script's question after a launch (NextLaunchRequest).
struct NextLaunchQuestion {
  int step_exit_code = 0;
  int requeue_count = 0;            // > 0: Slurm requeued the job; no launch yet
  std::string allocation_nodelist;  // with requeue_count
  bool terminated_by_slurm = false;
  bool time_limit_warned = false;  // the batch script got Slurm's wall-time warning
};

struct NextLaunchAnswer {
  bool relaunch = false;
  int next_launch = 0;
  std::vector<std::string> nodes;  // on relaunch: where the next srun step runs
  int exit_code = 0;
  std::string reason;
  // On relaunch: the run's spare pool jobs whose nodes join it (one more srun
  // step in each); `nodes` then names the batch job's own nodes only (none:
  // the batch job runs no step).
  struct OtherJob {
    std::string job_id;
    std::vector<std::string> nodes;
  };
  std::vector<OtherJob> other_jobs{};
};

// A spare pool node's worker standing by (StandByRequest).
struct StandbyCall {
  std::string run_id;
  int pool = 0;
  std::string node;
  std::string secret;
  std::string version;
  std::string hostname;
  std::string slurm_job_id;
  NodeProbe probe;
};

struct StandbyAnswer {
  bool leave = false;  // the pool job was drawn or ended: the worker exits
  std::string reason;
};

struct NodeStatusView {
  QuarantineEntry entry;
  NodeHealth health = NodeHealth::kOk;
};

struct GateRecordView {
  int attempt = 0;
  int launch = 0;
  WallTime time;
  std::string decision;
  std::string reason;
  std::string policy_json;
  std::vector<NodeGateView> nodes;
};

struct GateReportView {
  std::string run_id;
  std::vector<GateRecordView> records;
};

// A WatchRun subscriber. Called on the controller's loop thread; must not block.
class WatchSink {
 public:
  virtual ~WatchSink() = default;
  virtual void OnTransition(const EventRecord& event) = 0;
  virtual void OnStep(const StepRow& step) = 0;
  // The run reached a terminal state (or the controller is stopping).
  virtual void OnEnd() = 0;
};

template <typename T>
using Reply = std::function<void(absl::StatusOr<T>)>;

}  // namespace trellis::controller
