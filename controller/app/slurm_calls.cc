#include "controller/app/slurm_calls.h"

#include <algorithm>

#include "common/atomic_file.h"
#include "common/log.h"
#include "common/overloaded.h"

namespace trellis::controller {

namespace {

// The attempt's job by name if one exists (submitted before the controller
// heard the id: the oldest kept, any other cancelled), else a new sbatch.
JobSubmitted Submit(SlurmClient& slurm, const SubmitJob& call) {
  JobSubmitted out{call.run_id, call.attempt, absl::UnknownError(""), "", {}, call.pool,
                   call.certify_node};
  auto named = slurm.JobsNamed(call.job_name);
  if (!named.ok()) {
    out.job = absl::UnavailableError("cannot look for a job named " + call.job_name + ": " +
                                     std::string(named.status().message()));
    return out;
  }
  if (named->empty() && call.only_adopt) {
    out.job = absl::NotFoundError("no job named " + call.job_name);
    return out;
  }
  // Before a job found by name too: one still queued reads them when it starts.
  for (const SubmitJob::File& f : call.files_first)
    if (absl::Status st = WriteFileAtomically(f.path, f.content, 0600); !st.ok()) {
      out.job =
          absl::UnavailableError("cannot write " + f.path + ": " + std::string(st.message()));
      return out;
    }
  if (named->empty()) {
    out.job = slurm.Submit(call.args, call.script_path);
    return out;
  }
  auto oldest = std::min_element(named->begin(), named->end(), [](const auto& a, const auto& b) {
    return std::stoll(a.id) < std::stoll(b.id);
  });
  out.job = oldest->id;
  out.adopted = oldest->id;
  for (const auto& j : *named)
    if (j.id != oldest->id) {
      absl::Status c = slurm.Cancel(j.id);
      out.cancelled.push_back(
          j.id + (c.ok() ? "" : " (scancel failed: " + std::string(c.message()) + ")"));
    }
  return out;
}

NodesListed ListUsable(SlurmClient& slurm, const ListUsableNodes& call) {
  NodesListed out;
  for (const auto& p : call.partitions) {
    auto nodes = slurm.ListNodes(p);
    if (!nodes.ok()) {
      out.usable.emplace(p, nodes.status());
      continue;
    }
    std::vector<std::string> names;
    for (const auto& node : *nodes)
      if (IsUsableNodeState(node.state)) names.push_back(node.name);
    out.usable.emplace(p, names);
  }
  if (auto all = slurm.ListPartitions(); all.ok()) out.partitions = *all;
  // Without accounting (no slurmdbd) sacctmgr fails: then nothing is checked.
  if (call.associations)
    if (auto assocs = slurm.ListAssociations(); assocs.ok()) out.associations = *assocs;
  return out;
}

JobsSeen Query(SlurmClient& slurm, const QueryJobs& call) {
  JobsSeen out{slurm.ListJobs(), {}, call.startup};
  for (const auto& id : call.job_ids) {
    bool in_queue = false;
    if (out.listed.ok())
      for (const auto& j : *out.listed) in_queue = in_queue || j.id == id;
    if (in_queue) continue;
    // Not queued or running: ask for its end state (accounting first where it exists).
    auto acct = slurm.AccountingJob(id);
    out.shown.emplace(id, acct.ok() && acct->has_value() ? acct : slurm.ShowJob(id));
  }
  return out;
}

}  // namespace

bool IsSlurmCall(const Command& c) {
  return std::holds_alternative<ListUsableNodes>(c) || std::holds_alternative<SubmitJob>(c) ||
         std::holds_alternative<CancelJob>(c) || std::holds_alternative<CancelRunJob>(c) ||
         std::holds_alternative<SignalStep>(c) || std::holds_alternative<ReleaseJob>(c) || std::holds_alternative<QueryJobs>(c) ||
         std::holds_alternative<ShowJob>(c) || std::holds_alternative<DrainNode>(c);
}

SlurmAnswer CallSlurm(SlurmClient& slurm, const Command& call) {
  return std::visit(
      Overloaded{
          [&](const ListUsableNodes& c) -> SlurmAnswer { return ListUsable(slurm, c); },
          [&](const SubmitJob& c) -> SlurmAnswer { return Submit(slurm, c); },
          [&](const CancelJob& c) -> SlurmAnswer {
            absl::Status st = slurm.Cancel(c.job_id);
            if (!st.ok())
              spdlog::error("scancel {} ({}) failed: {}", c.job_id, c.why,
                            std::string(st.message()));
            return std::monostate{};
          },
          [&](const CancelRunJob& c) -> SlurmAnswer {
            return RunJobCancelled{c, slurm.Cancel(c.job_id)};
          },
          [&](const ReleaseJob& c) -> SlurmAnswer {
            absl::Status st = slurm.ReleaseWaitingJob(c.job_id, c.start_in, c.exclude);
            if (!st.ok())
              spdlog::warn("run {}: releasing waiting job {} failed (it starts at its --begin): {}",
                           c.run_id, c.job_id, std::string(st.message()));
            return std::monostate{};
          },
          [&](const SignalStep& c) -> SlurmAnswer {
            absl::Status st = slurm.SignalStep(c.job_id, c.step_id, c.signal);
            if (!st.ok())
              spdlog::error("run {}: scancel --signal={} {}.{} failed: {}", c.run_id, c.signal,
                            c.job_id, c.step_id, std::string(st.message()));
            return std::monostate{};
          },
          [&](const QueryJobs& c) -> SlurmAnswer { return Query(slurm, c); },
          [&](const ShowJob& c) -> SlurmAnswer {
            return JobShown{c.job_id, slurm.ShowJob(c.job_id)};
          },
          [&](const DrainNode& c) -> SlurmAnswer {
            absl::Status drained = slurm.Drain(c.node, c.reason);
            if (!drained.ok())
              spdlog::warn("drain of {} failed: {}", c.node, std::string(drained.message()));
            return std::monostate{};
          },
          [](const auto&) -> SlurmAnswer { return std::monostate{}; },
      },
      call);
}

}  // namespace trellis::controller
