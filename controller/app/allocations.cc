#include "controller/app/allocations.h"

#include "common/log.h"

namespace trellis::controller {

Effects Allocations::Check(const std::string& job_id, const std::string& node, bool fresh,
                           uint64_t ticket) {
  if (job_id.empty())
    return NodeChecked{ticket, absl::UnavailableError(
                                   "the attempt's Slurm job id is not recorded yet, so its "
                                   "allocation is unknown; register again")};
  Job& job = jobs_[job_id];
  const Allocation* known = job.known ? &*job.known : nullptr;
  switch (JudgeNodeClaim(known, node, fresh, ctx_.clock.SteadyNow() - job.asked, kReaskAfter)) {
    case NodeClaim::kInside: return NodeChecked{ticket, absl::OkStatus()};
    case NodeClaim::kOutside: return NodeChecked{ticket, OutsideAllocation(node, job_id, *known)};
    case NodeClaim::kAsk: break;
  }
  if (job.in_flight) {
    // A fresh question must not be answered by one asked before it came.
    (fresh ? job.next : job.waiting).push_back({node, ticket});
    return {};
  }
  job.waiting.push_back({node, ticket});
  return Ask(job_id, job);
}

const Allocation* Allocations::Known(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it != jobs_.end() && it->second.known ? &*it->second.known : nullptr;
}

Effects Allocations::Ask(const std::string& job_id, Job& job) {
  job.in_flight = true;
  job.asked = ctx_.clock.SteadyNow();
  return ShowJob{job_id};
}

Effects Allocations::Answered(const JobShown& answer) {
  const std::string& job_id = answer.job_id;
  const auto& shown = answer.shown;
  Job& job = jobs_[job_id];
  job.in_flight = false;
  absl::Status error;
  if (!shown.ok()) {
    error = absl::UnavailableError("the allocation of Slurm job " + job_id +
                                   " is unknown (scontrol: " +
                                   std::string(shown.status().message()) + "); try again");
  } else {
    // A job Slurm no longer knows has no nodes.
    auto a = AllocationOf(shown->has_value() ? (*shown)->nodelist : "");
    if (a.ok()) {
      job.known = std::move(*a);
    } else {
      spdlog::warn("job {}: Slurm's nodelist does not parse: {}", job_id,
                   std::string(a.status().message()));
      error = absl::UnavailableError("the allocation of Slurm job " + job_id +
                                     " does not parse; try again");
    }
  }
  Effects fx;
  std::vector<Waiter> decided = std::move(job.waiting);
  job.waiting = std::move(job.next);
  job.next.clear();
  for (const Waiter& w : decided) {
    absl::Status st = !error.ok()                     ? error
                      : job.known->nodes.count(w.node) ? absl::OkStatus()
                                                       : OutsideAllocation(w.node, job_id,
                                                                           *job.known);
    fx.Add(NodeChecked{w.ticket, st});
  }
  // Fresh questions that came while this one was in flight are asked now.
  if (!job.waiting.empty() && !job.in_flight) fx += Ask(job_id, job);
  return fx;
}

void Allocations::Observe(const std::vector<SlurmJob>& listed) {
  std::map<std::string, const SlurmJob*> by_id;
  for (const SlurmJob& j : listed) by_id[j.id] = &j;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job& job = it->second;
    auto seen = by_id.find(it->first);
    if (seen == by_id.end()) {
      // Ended: forgotten, unless callers wait on a question about it.
      if (!job.in_flight && job.waiting.empty()) {
        it = jobs_.erase(it);
        continue;
      }
    } else if (!job.known || job.known->nodelist != seen->second->nodelist) {
      auto a = AllocationOf(seen->second->nodelist);
      if (a.ok()) {
        job.known = std::move(*a);
        job.asked = ctx_.clock.SteadyNow();
      }
    }
    ++it;
  }
}

}  // namespace trellis::controller
