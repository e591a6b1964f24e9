#pragma once
// The allocations of the controller's Slurm jobs, as Slurm reports them, so
// that a worker's claimed node is checked against its attempt's job
// (controller/core/allocation.h). Learned by asking `scontrol show job` on the
// first agent call of a job (one question in flight per job, the callers
// waiting on it) and kept current by the reconciler's squeue. A part of the
// controller (docs/architecture.md, "The controller's parts"): loop thread
// only, returns Effects.
//
// Slurm calls run one at a time in the order they were made, and their
// answers reach the loop in that order, so a later answer is never older.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "controller/app/effects.h"
#include "controller/app/loop_context.h"
#include "controller/core/allocation.h"
#include "controller/core/slurm_facts.h"

namespace trellis::controller {

class Allocations {
 public:
  // A node outside Slurm's answer is refused without asking again this soon.
  static constexpr std::chrono::seconds kReaskAfter{10};

  explicit Allocations(LoopContext ctx) : ctx_(ctx) {}

  // Answered with NodeChecked{ticket, status} (the shell holds what comes
  // next under `ticket`): OK when `node` is in job `job_id`'s allocation,
  // PERMISSION_DENIED naming both when it is not, and UNAVAILABLE when the
  // allocation cannot be known now (no job id yet, Slurm not answering): the
  // worker retries. Nothing is accepted unchecked, since a node's name is
  // what gate verdicts and quarantine strikes are about. `fresh`: ask Slurm
  // even when an answer is known (a requeued job's allocation is new).
  Effects Check(const std::string& job_id, const std::string& node, bool fresh, uint64_t ticket);
  // The reconciler's squeue: known allocations follow it, and jobs it no
  // longer lists are forgotten.
  void Observe(const std::vector<SlurmJob>& listed);
  // Slurm's latest answer for the job, if any (nullptr: none known).
  const Allocation* Known(const std::string& job_id) const;
  // The answer to the ShowJob that Check returned: the callers waiting on it
  // are decided.
  Effects Answered(const JobShown& answer);

 private:
  struct Waiter {
    std::string node;
    uint64_t ticket = 0;
  };
  struct Job {
    std::optional<Allocation> known;  // Slurm's latest answer
    SteadyTime asked{};               // when that answer was asked for
    bool in_flight = false;
    std::vector<Waiter> waiting;  // decided by the question in flight
    std::vector<Waiter> next;     // need a question asked after they came
  };
  Effects Ask(const std::string& job_id, Job& job);

  LoopContext ctx_;
  std::map<std::string, Job> jobs_;
};

}  // namespace trellis::controller
