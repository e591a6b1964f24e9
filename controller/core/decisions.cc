#include "controller/core/decisions.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>
#include <tuple>

#include "controller/core/recovery.h"

namespace trellis::controller {

std::string UnknownPartition(const std::string& partition, const std::vector<std::string>& known) {
  if (partition.empty() || known.empty() ||
      std::find(known.begin(), known.end(), partition) != known.end())
    return "";
  std::string list;
  for (const std::string& p : known) list += (list.empty() ? "" : ", ") + p;
  return "slurm.partition: '" + partition + "' is not a partition of this cluster; its "
         "partitions: " + list;
}

std::string RefusedAccountOrQos(const spec::SlurmSection& slurm,
                                const std::vector<SlurmAssociation>& associations) {
  if (associations.empty()) return "";
  auto join = [](const std::vector<std::string>& names) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    return list;
  };
  std::vector<std::string> accounts, qos;
  for (const SlurmAssociation& a : associations) {
    accounts.push_back(a.account);
    if (!slurm.account.empty() && a.account != slurm.account) continue;
    for (const std::string& q : a.qos)
      if (std::find(qos.begin(), qos.end(), q) == qos.end()) qos.push_back(q);
  }
  if (!slurm.account.empty() &&
      std::find(accounts.begin(), accounts.end(), slurm.account) == accounts.end())
    return "slurm.account: '" + slurm.account + "' is not an account of yours in Slurm's "
           "accounting; yours: " + join(accounts);
  // The last --qos wins, as sbatch reads its options.
  std::string asked;
  for (const std::string& arg : slurm.extra_args)
    if (arg.rfind("--qos=", 0) == 0) asked = arg.substr(6);
  if (asked.empty() || qos.empty() || std::find(qos.begin(), qos.end(), asked) != qos.end())
    return "";
  return "slurm.extra_args: --qos=" + asked + " is not a QOS " +
         (slurm.account.empty() ? std::string("of your accounts") : "of account " + slurm.account) +
         " in Slurm's accounting; allowed: " + join(qos);
}

std::string NeverStartsWhile(const std::string& pending_reason) {
  // Slurm's reason codes (squeue %r; "man squeue", JOB REASON CODES).
  static const std::map<std::string, std::string, std::less<>> kNever = {
      {"PartitionNodeLimit", "it asks more nodes than its partition allows"},
      {"PartitionTimeLimit", "its time limit is over its partition's"},
      {"PartitionConfig", "it asks what its partition cannot give (nodes, time or GPUs)"},
      {"PartitionInactive", "its partition is inactive"},
      {"PartitionDown", "its partition is down"},
      {"ReqNodeNotAvail", "a node it needs is down, drained or reserved"},
      {"BadConstraints", "its constraints match no node"},
      {"AccountNotAllowed", "its account may not use the partition"},
      {"InvalidAccount", "its account is not valid"},
      {"InvalidQOS", "its QOS is not valid"},
      {"QOSNotAllowed", "its QOS may not use the partition"},
      {"QOSMaxNodePerJobLimit", "it asks more nodes than its QOS allows a job"},
      {"QOSMaxWallDurationPerJobLimit", "its time limit is over its QOS's"},
      {"AssocMaxNodesPerJobLimit", "it asks more nodes than its association allows a job"},
      {"AssocMaxWallDurationPerJobLimit", "its time limit is over its association's"},
      {"DependencyNeverSatisfied", "a job it depends on can no longer satisfy it"},
      {"JobHeldAdmin", "an administrator holds it"},
  };
  // squeue prints "ReqNodeNotAvail, UnavailableNodes:node4": the code first.
  const std::string code = pending_reason.substr(0, pending_reason.find_first_of(", "));
  auto it = kNever.find(code);
  return it == kNever.end() ? "" : it->second;
}

namespace {
// "1 node", "2 nodes".
std::string NodeCount(int64_t n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }
}  // namespace

ScheduleDecision DecideSchedule(int nodes_needed, int nodes_eligible, WallTime not_before,
                                WallTime now) {
  if (nodes_eligible < nodes_needed) {
    return {false, "needs " + NodeCount(nodes_needed) + ", " + std::to_string(nodes_eligible) +
                       " eligible"};
  }
  if (now < not_before) {
    auto left = std::chrono::duration_cast<std::chrono::seconds>(not_before - now).count();
    return {false, "restart backoff, " + std::to_string(left) + " s left"};
  }
  return {true, ""};
}

bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      std::string na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      na.erase(0, std::min(na.find_first_not_of('0'), na.size()));
      nb.erase(0, std::min(nb.find_first_not_of('0'), nb.size()));
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

GateOutcome DecideGate(const std::vector<NodeVerdict>& registered,
                       const std::vector<std::string>& allocated, int expected_nodes,
                       int nodes_needed, int ranks_per_node, bool timed_out,
                       std::chrono::seconds timeout) {
  GateOutcome out;
  if (static_cast<int>(registered.size()) < expected_nodes && !timed_out) return out;
  out.verdicts = registered;
  for (const auto& name : allocated) {
    bool seen = std::any_of(registered.begin(), registered.end(),
                            [&](const NodeVerdict& v) { return v.node == name; });
    if (!seen) {
      NodeVerdict missing;
      missing.node = name;
      missing.reasons = {"no registration within " + std::to_string(timeout.count()) + " s"};
      out.verdicts.push_back(std::move(missing));
    }
  }
  std::vector<const NodeVerdict*> passing;
  for (const auto& v : out.verdicts) {
    if (v.passed)
      passing.push_back(&v);
    else
      out.failed_nodes.push_back(v.node);
  }
  // Best first: nodes with room for the ranks' host memory before those
  // short of it, then the most free memory on the worst socket; ties by name.
  std::sort(passing.begin(), passing.end(), [](const NodeVerdict* a, const NodeVerdict* b) {
    const bool a_short = !a->short_of_ranks_memory.empty();
    const bool b_short = !b->short_of_ranks_memory.empty();
    if (a_short != b_short) return b_short;
    return a->score != b->score ? a->score > b->score : NaturalLess(a->node, b->node);
  });
  int missing = expected_nodes - static_cast<int>(registered.size());
  if (static_cast<int>(passing.size()) < nodes_needed) {
    out.kind = GateOutcome::kAbort;
    out.reason = std::to_string(passing.size()) + " of " + std::to_string(expected_nodes) +
                 " nodes passed, " + std::to_string(nodes_needed) + " needed";
    if (missing > 0) out.reason += "; " + std::to_string(missing) + " never registered";
    for (const auto& v : out.verdicts)
      if (!v.passed && !v.reasons.empty()) out.reason += "; " + v.node + ": " + v.reasons[0];
    return out;
  }
  out.kind = GateOutcome::kGo;
  std::vector<std::string> chosen;
  for (int i = 0; i < nodes_needed; ++i) chosen.push_back(passing[i]->node);
  std::sort(chosen.begin(), chosen.end(), NaturalLess);
  for (const auto& v : registered) {
    NodeAssignment a{v.node, false, -1, -1};
    auto it = std::find(chosen.begin(), chosen.end(), v.node);
    if (it != chosen.end()) {
      a.go = true;
      a.node_index = static_cast<int>(it - chosen.begin());
      a.rank_offset = a.node_index * ranks_per_node;
    }
    out.assignments.push_back(a);
  }
  int standby = static_cast<int>(passing.size()) - nodes_needed;
  out.reason = NodeCount(nodes_needed) + (nodes_needed == 1 ? " goes, " : " go, ") +
               std::to_string(standby) + " standing by";
  if (!out.failed_nodes.empty())
    out.reason += ", " + std::to_string(out.failed_nodes.size()) + " failed the gate";
  for (int i = 0; i < nodes_needed; ++i)
    if (!passing[i]->short_of_ranks_memory.empty())
      out.reason += "; " + passing[i]->node + " short of the ranks' host memory: " +
                    passing[i]->short_of_ranks_memory[0];
  return out;
}

RestartDecision DecideRestart(int restarts_so_far, const spec::RestartSection& policy,
                              const std::string& failure, WallTime now,
                              const std::vector<PastLaunch>& earlier_launches) {
  if (restarts_so_far >= policy.max_restarts) {
    return {false, now,
            failure + " (" + std::to_string(restarts_so_far) + " of " +
                std::to_string(policy.max_restarts) + " restarts used)"};
  }
  int64_t delay =
      RestartBackoff(BackoffRestarts(earlier_launches, restarts_so_far, policy), policy).count();
  return {true, now + std::chrono::seconds(delay),
          failure + "; restart " + std::to_string(restarts_so_far + 1) + " of " +
              std::to_string(policy.max_restarts) + " in " + std::to_string(delay) + " s"};
}

bool RequeuedBySlurm(RunState run_state, const SlurmJob& job) {
  bool started = run_state == RunState::kGating || run_state == RunState::kRunning ||
                 run_state == RunState::kRestarting;
  return started && job.state == SlurmJobState::kPending;
}

namespace {

// An exit.json written before Slurm requeued the job speaks for an earlier
// run of the batch script, not for the one that ended.
bool WrittenBeforeARequeue(const std::optional<SlurmJob>& job, const ExitFile& f) {
  return job && job->restarts && f.restarts && *f.restarts < *job->restarts;
}

}  // namespace

Reconciliation Reconcile(const std::optional<SlurmJob>& job,
                         const std::optional<ExitFile>& written) {
  bool stale = written && WrittenBeforeARequeue(job, *written);
  std::optional<ExitFile> exit_file = stale ? std::nullopt : written;
  Reconciliation r;
  if (job && !IsTerminalJobState(job->state)) {
    r.nodelist = job->nodelist;
    return r;  // alive as far as Slurm knows
  }
  r.kind = Reconciliation::kEnded;
  if (job) r.nodelist = job->nodelist;
  if (job && job->state == SlurmJobState::kTimeout) r.stopped_by = FailureClass::kTimeLimit;
  if (job && job->state == SlurmJobState::kPreempted) r.stopped_by = FailureClass::kPreemption;
  if (exit_file && exit_file->reason == "wall-time warning")
    r.stopped_by = FailureClass::kTimeLimit;
  if (exit_file) {
    // The batch script's own record is the most precise one.
    r.exit_code = exit_file->exit_code;
    r.succeeded = exit_file->exit_code == 0 && (!job || job->state == SlurmJobState::kCompleted);
    r.reason = exit_file->reason.empty() ? "batch script exited " + std::to_string(r.exit_code)
                                         : exit_file->reason;
    if (job && job->state != SlurmJobState::kCompleted)
      r.reason += " (Slurm: " + job->state.name() + ")";
    return r;
  }
  if (job) {
    r.exit_code = job->exit_code.value_or(1);
    r.succeeded = job->state == SlurmJobState::kCompleted && r.exit_code == 0;
    r.reason = "Slurm job " + job->id + " ended " + job->state.name() + " with exit code " +
               std::to_string(r.exit_code);
    r.reason += stale ? " after requeue " + std::to_string(*job->restarts) +
                            ", before its batch script wrote an exit.json (the one there is "
                            "from before the requeue)"
                      : " and left no exit.json";
    return r;
  }
  r.exit_code = 1;
  r.reason = "Slurm job vanished and left no exit.json";
  return r;
}

}  // namespace trellis::controller
