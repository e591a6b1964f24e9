#include "controller/core/continuation.h"

#include <algorithm>

namespace trellis::controller {

namespace {

using std::chrono::seconds;

std::string Secs(seconds s) { return std::to_string(s.count()) + " s"; }

}  // namespace

LeadChoice ChooseContinuationLead(int lead_s, const std::vector<seconds>& waits,
                                  int signal_grace_s, std::optional<seconds> time_limit) {
  LeadChoice c;
  if (lead_s > 0) {
    c.lead = seconds(lead_s);
    c.why = "restart.continuation_lead_s = " + std::to_string(lead_s);
  } else {
    // Before the warning: a continuation eligible after it comes too late to
    // take over (the warning's own continuation takes it instead), and Slurm
    // may send the warning up to a minute before signal_grace_s.
    const seconds floor = std::max(kAutoLeadFloor, seconds(signal_grace_s) + seconds(90));
    if (waits.size() < kAutoLeadMinWaits) {
      c.lead = std::max(kAutoLeadPrior, floor);
      c.why = "auto: " + std::to_string(waits.size()) + " queue wait(s) seen on the partition, " +
              "fewer than " + std::to_string(kAutoLeadMinWaits) + ": the prior " +
              Secs(c.lead);
    } else {
      std::vector<seconds> newest(
          waits.end() - static_cast<std::ptrdiff_t>(std::min(waits.size(), kAutoLeadWaits)),
          waits.end());
      std::sort(newest.begin(), newest.end());
      // Nearest rank: the smallest wait at or above 90% of them.
      size_t rank = (newest.size() * 9 + 9) / 10;  // ceil(0.9 n), 1-based
      const seconds p90 = newest[std::max<size_t>(rank, 1) - 1];
      c.lead = std::clamp(p90, floor, std::max(floor, kAutoLeadCeiling));
      c.why = "auto: 90th percentile of the newest " + std::to_string(newest.size()) +
              " queue waits on the partition " + Secs(p90) +
              (c.lead != p90 ? (c.lead == floor ? ", raised to the floor " + Secs(floor)
                                                : ", cut to the ceiling " + Secs(c.lead))
                             : "");
    }
  }
  if (time_limit && time_limit->count() > 0 && c.lead > *time_limit / 2) {
    c.lead = *time_limit / 2;
    c.why += "; at most half the job's time limit: " + Secs(c.lead);
  }
  return c;
}

std::vector<seconds> QueueWaitsOn(const std::vector<AttemptQueueFacts>& attempts,
                                  const std::string& partition) {
  std::vector<const AttemptQueueFacts*> on;
  for (const auto& a : attempts)
    if (a.partition == partition && a.started) on.push_back(&a);
  std::sort(on.begin(), on.end(),
            [](const AttemptQueueFacts* x, const AttemptQueueFacts* y) {
              return *x->started < *y->started;
            });
  std::vector<seconds> waits;
  for (const auto* a : on)
    waits.push_back(std::max(seconds(0), std::chrono::duration_cast<seconds>(*a->started -
                                                                              a->eligible)));
  return waits;
}

AheadDecision DecideAhead(const AheadFacts& f) {
  AheadDecision d;
  if (!f.ahead_mode || f.state != RunState::kRunning || f.has_waiting) return d;
  if (!f.time_limit || !f.time_left || f.time_left->count() <= 0) return d;
  if (*f.time_left > f.lead + kSubmitAheadMargin) return d;
  d.submit = true;
  d.begin_in = std::max(seconds(0), *f.time_left - f.lead);
  d.why = "eligible in " + Secs(d.begin_in) + ", " + Secs(f.lead) +
          " before the current attempt's time limit (" + Secs(*f.time_left) + " left)";
  return d;
}

}  // namespace trellis::controller
