#include "controller/core/continuation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace trellis::controller {

namespace {

using std::chrono::seconds;

std::string Secs(seconds s) { return std::to_string(s.count()) + " s"; }

// The waits as a lognormal fitted to them (queue waits are near one; Slurm
// sites and the goodput simulator's scenario alike), so that the tail past
// the longest wait seen counts too: the expected wait past a lead L is
// E[(W - L)+] = e^(mu + s^2/2) Phi(d + s) - L Phi(d), d = (mu - ln L) / s.
struct WaitFit {
  double mu = 0, sigma = 0;
  double PastLead(double lead) const {
    auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
    if (sigma <= 1e-9) return std::max(0.0, std::exp(mu) - lead);
    const double d = (mu - std::log(std::max(lead, 1.0))) / sigma;
    return std::max(0.0, std::exp(mu + sigma * sigma / 2) * phi(d + sigma) - lead * phi(d));
  }
};

WaitFit FitWaits(const std::vector<seconds>& waits) {
  WaitFit f;
  for (seconds w : waits) f.mu += std::log(std::max<double>(1, static_cast<double>(w.count())));
  f.mu /= static_cast<double>(waits.size());
  for (seconds w : waits) {
    const double d = std::log(std::max<double>(1, static_cast<double>(w.count()))) - f.mu;
    f.sigma += d * d;
  }
  f.sigma = waits.size() > 1 ? std::sqrt(f.sigma / static_cast<double>(waits.size() - 1)) : 0;
  return f;
}

// The lead in [lo, hi] that loses the least per second trained
// (continuation.h): lo, hi and 64 leads between, evenly on a log scale.
LeadChoice LeastLossLead(const std::vector<seconds>& waits, seconds lo, seconds hi,
                         seconds limit) {
  const WaitFit fit = FitWaits(waits);
  std::vector<seconds> candidates = {lo, hi};
  constexpr int kSteps = 64;
  const double a = std::log(static_cast<double>(std::max<int64_t>(1, lo.count())));
  const double b = std::log(static_cast<double>(std::max<int64_t>(1, hi.count())));
  for (int i = 1; i < kSteps; ++i)
    candidates.push_back(seconds(static_cast<int64_t>(std::exp(a + (b - a) * i / kSteps))));
  LeadChoice best;
  double best_loss = 0;
  for (seconds lead : candidates) {
    const double trained = static_cast<double>((limit - lead).count());
    if (lead < lo || lead > hi || trained <= 0) continue;
    const double loss =
        (fit.PastLead(static_cast<double>(lead.count())) +
         static_cast<double>(kAutoLeadHandoffCost.count())) / trained;
    if (best.lead.count() == 0 || loss < best_loss) {
      best.lead = lead;
      best_loss = loss;
    }
  }
  if (best.lead.count() == 0) best.lead = lo;
  char text[160];
  std::snprintf(text, sizeof text,
                "(a lognormal of median %.0f s, sigma %.2f); a lead of %lld s loses the least: "
                "%.2f%% of an attempt's training",
                std::exp(fit.mu), fit.sigma, static_cast<long long>(best.lead.count()),
                100 * best_loss);
  best.why = "auto: the newest " + std::to_string(waits.size()) +
             " queue waits on the partition " + text + " (waits past it, and a handoff taken " +
             "at " + Secs(kAutoLeadHandoffCost) + ", over " + Secs(limit - best.lead) +
             " trained)";
  return best;
}

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
      const seconds ceiling = std::max(floor, kAutoLeadCeiling);
      if (time_limit && time_limit->count() > 0) {
        c = LeastLossLead(newest, floor, std::min(ceiling, std::max(floor, *time_limit / 2)),
                          *time_limit);
      } else {
        // Nearest rank: the smallest wait at or above 90% of them.
        size_t rank = (newest.size() * 9 + 9) / 10;  // ceil(0.9 n), 1-based
        const seconds p90 = newest[std::max<size_t>(rank, 1) - 1];
        c.lead = std::clamp(p90, floor, ceiling);
        c.why = "auto: 90th percentile of the newest " + std::to_string(newest.size()) +
                " queue waits on the partition " + Secs(p90) +
                (c.lead != p90 ? (c.lead == floor ? ", raised to the floor " + Secs(floor)
                                                  : ", cut to the ceiling " + Secs(c.lead))
                               : "");
      }
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
