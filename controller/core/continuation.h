#pragma once
// Continuations submitted ahead (restart.continuation = "ahead";
// docs/architecture.md, "Continuations ahead"): while an attempt trains, its
// continuation waits in Slurm's queue, eligible a lead before the attempt's
// time limit, and takes over when it starts. Pure: when to submit it, and
// the lead.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "controller/core/run_state.h"

namespace trellis::controller {

// "auto", from the newest kAutoLeadWaits queue waits seen on the partition:
// with the job's time limit T known, the lead L among the floor and those
// waits that loses the least per second trained: (the mean wait past L, which
// the run spends queued after the limit, plus a handoff's cost) / (T - L), an
// attempt's training. A longer lead catches more of the queue's tail and
// costs more handoffs, each attempt being shorter. Without T, the 90th
// percentile. Within [the floor and 90 s more than the wall-time warning's
// lead (Slurm may send it up to 60 s early), the ceiling]; with fewer than
// kAutoLeadMinWaits seen, the prior. Every lead is at most half the job's time
// limit: a continuation eligible sooner would take over from an attempt that
// has barely started.
inline constexpr std::chrono::seconds kAutoLeadFloor{60};
inline constexpr std::chrono::seconds kAutoLeadCeiling{12 * 3600};
// What a handoff is taken to cost, for the choice above: a new allocation's
// start (its gate, the ranks' model load and first step) and the old ranks'
// stop at a step boundary. Measured on small runs at 2-10 s
// (docs/architecture.md, "Continuations ahead"); taken larger, as a start of
// thousands of ranks is, which favours shorter leads.
inline constexpr std::chrono::seconds kAutoLeadHandoffCost{300};
inline constexpr std::chrono::seconds kAutoLeadPrior{600};
inline constexpr size_t kAutoLeadWaits = 20;
inline constexpr size_t kAutoLeadMinWaits = 3;

struct LeadChoice {
  std::chrono::seconds lead{0};
  std::string why;  // for the run's events: how it was chosen
};

// `lead_s`: restart.continuation_lead_s (0: "auto"). `waits`: the queue waits
// on the run's partition, oldest first. `signal_grace_s`: the warning's lead
// (slurm.signal_grace_s). `time_limit`: the job's, where it has one.
LeadChoice ChooseContinuationLead(int lead_s, const std::vector<std::chrono::seconds>& waits,
                                  int signal_grace_s,
                                  std::optional<std::chrono::seconds> time_limit);

// An attempt as queue waits need it: when Slurm could first start it (its
// --begin, or its submission) and when its first launch passed the gate.
struct AttemptQueueFacts {
  std::string partition;  // "" for the cluster's default
  WallTime eligible;
  std::optional<WallTime> started;
};
// The waits of the attempts on `partition` that started, oldest first.
std::vector<std::chrono::seconds> QueueWaitsOn(const std::vector<AttemptQueueFacts>& attempts,
                                               const std::string& partition);

struct AheadFacts {
  bool ahead_mode = false;  // restart.continuation == "ahead"
  RunState state = RunState::kQueued;
  bool has_waiting = false;  // an attempt already waits ahead
  // The current attempt's job, from squeue: its limit (none: unlimited or
  // unknown) and the time it has left.
  std::optional<std::chrono::seconds> time_limit;
  std::optional<std::chrono::seconds> time_left;
  std::chrono::seconds lead{0};
};
struct AheadDecision {
  bool submit = false;
  std::chrono::seconds begin_in{0};  // --begin=now+N
  std::string why;
};
// Submits once the current attempt trains (RUNNING) in a job with a time
// limit, nothing waits yet, and the time it becomes eligible is at most
// kSubmitAheadMargin away; eligible `lead` before the job's limit (now, when
// less is left). Not sooner: Slurm counts a job's age from when it is
// eligible, so an earlier sbatch gains nothing, and a run that ends well
// before its limit leaves no job to cancel.
inline constexpr std::chrono::seconds kSubmitAheadMargin{120};
AheadDecision DecideAhead(const AheadFacts& facts);

}  // namespace trellis::controller
