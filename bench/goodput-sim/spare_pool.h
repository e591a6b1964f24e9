#pragma once
// The run's spare pool (restart.spare_pool_nodes; controller/core/recovery.h,
// rule 5): a standing Slurm job of N nodes of the run's own, submitted once
// the run's first job runs. It waits the queue like any job; once it runs, a
// relaunch that finds too few healthy nodes in its allocation draws it whole
// (its nodes join the attempt until the attempt ends), and a new pool job is
// submitted at once to refill, waiting the queue again. A standing job that
// reaches the partition's time limit ends; another is submitted then.
// Pure: randomness from its own stream, so that the rows without a pool draw
// what they drew before.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bench/goodput-sim/cluster.h"
#include "bench/goodput-sim/ledger.h"
#include "bench/goodput-sim/rng.h"
#include "bench/goodput-sim/scenario.h"
#include "controller/core/recovery.h"

namespace trellis::bench {

class SparePool {
 public:
  SparePool(const Scenario& sc, int nodes, uint64_t seed)
      : nodes_(nodes),
        limit_ms_(sc.time_limit_s > 0 ? sc.time_limit_s * 1000 : kNever),
        queue_median_s_(sc.queue_median_s),
        queue_sigma_(sc.queue_sigma),
        rng_(seed, 7) {}

  bool enabled() const { return nodes_ > 0; }
  bool submitted() const { return job_.has_value(); }

  // sbatch of a pool job at `now_ms`.
  void Submit(int64_t now_ms) {
    Job j;
    j.id = "pool-" + std::to_string(++counts_.jobs_submitted);
    j.up_ms = now_ms + std::llround(rng_.LogNormal(queue_median_s_, queue_sigma_) * 1000);
    job_ = std::move(j);
  }

  // The pool job standing at `now_ms` (RUNNING, not drawn), for
  // DecideRecovery; nullopt while it waits in the queue. Its nodes are
  // chosen when first needed, off `unavailable`: the quarantine (as the
  // controller keeps a pending job off the nodes struck since its
  // submission) and the nodes the run's allocation holds. One that would
  // end before the run's job (`run_job_end_ms`: submitted in an earlier
  // attempt) is replaced, as the controller does (controller/core/
  // spare_pool.h): drawn, it would end under the launch it joined.
  std::optional<controller::StandingPool> Standing(int64_t now_ms,
                                                   const std::vector<std::string>& unavailable,
                                                   const Cluster& cluster,
                                                   int64_t run_job_end_ms) {
    Replace(now_ms);
    if (!job_ || job_->up_ms > now_ms) return std::nullopt;
    if (limit_ms_ < kNever && job_->up_ms + limit_ms_ < run_job_end_ms) {
      ++counts_.replaced_short;
      counts_.standing_ms += now_ms - job_->up_ms;
      Submit(now_ms);
      return std::nullopt;
    }
    if (!job_->placed) {
      job_->nodes = cluster.Allocate(unavailable, nodes_, rng_);
      job_->placed = true;
    }
    return controller::StandingPool{job_->id, job_->nodes};
  }

  // A relaunch at `now_ms` drew the standing job: its nodes are the
  // attempt's until the attempt ends (its time limit `attempt_end_ms` at
  // the latest); a new job is submitted at once to refill.
  void Drawn(int64_t now_ms, int64_t attempt_end_ms) {
    ++counts_.draws;
    counts_.standing_ms += now_ms - job_->up_ms;
    drawn_ends_.push_back(std::min(job_->up_ms + limit_ms_, attempt_end_ms));
    Submit(now_ms);
  }

  // The attempt ended at `now_ms`: the pool jobs it drew end with it. Those
  // whose own time limit came first are counted (the model keeps their nodes
  // in the allocation to the attempt's end; Slurm would not).
  void AttemptEnds(int64_t now_ms) {
    for (int64_t end : drawn_ends_) counts_.drawn_outlived += end < now_ms;
    drawn_ends_.clear();
  }

  // A failure needed a new attempt while the pool job still waited in the queue.
  void QueuedAtNeed() { ++counts_.queued_at_need; }

  PoolCounts Finish(int64_t horizon_ms) {
    Replace(horizon_ms);
    if (job_ && job_->up_ms < horizon_ms) counts_.standing_ms += horizon_ms - job_->up_ms;
    return counts_;
  }

 private:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max() / 4;

  struct Job {
    std::string id;
    int64_t up_ms = 0;    // its queue wait over: it runs
    bool placed = false;  // its nodes chosen
    std::vector<std::string> nodes;
  };

  // Standing jobs that reached their time limit by `now_ms` ended; each was
  // replaced then.
  void Replace(int64_t now_ms) {
    while (job_ && job_->up_ms + limit_ms_ <= now_ms) {
      ++counts_.expired;
      counts_.standing_ms += limit_ms_;
      Submit(job_->up_ms + limit_ms_);
    }
  }

  const int nodes_;
  const int64_t limit_ms_;
  const double queue_median_s_, queue_sigma_;
  Rng rng_;
  std::optional<Job> job_;           // the pool job standing or queued
  std::vector<int64_t> drawn_ends_;  // the current attempt's drawn jobs: their ends
  PoolCounts counts_;
};

}  // namespace trellis::bench
