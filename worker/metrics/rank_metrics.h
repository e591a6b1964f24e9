#pragma once
// The node's ranks as Prometheus series (docs/architecture.md, "A run's life,
// as implemented", step 5): the worker serves them on its own /metrics while
// the ranks run. Pure: the families live in a registry the caller owns and
// serves; nothing here opens a socket or reads a clock.
//
// Every rank series carries exactly {run, node, rank}; trellis_rank_info adds
// {socket, gpu} for joins with GPU exporters. No label ever holds a step, a
// Slurm job id, an attempt or launch number or free text, so a series lives as
// long as its rank and the set stays bounded by the node's ranks.
//
// Counters add each record's figures once: a record whose step is not newer
// than the last one counted for its rank is a replay and changes nothing.
// alloc_retries is the rank's own cumulative count, so the counter grows by
// the difference to the largest value seen and never falls. Optional fields
// get their series when a record first carries them, so a rank that never
// measures a phase exports no zero for it.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/step_record.h"
#include "worker/core/rank_layout.h"

namespace trellis::worker {

// The labels trellis_rank_info adds to {run, node, rank}.
struct RankInfo {
  std::string socket = "none";  // the NUMA node the rank is bound to
  std::string gpu = "none";     // the CUDA_VISIBLE_DEVICES the rank got
};

// What the worker knows of a rank before it starts. A CUDA_VISIBLE_DEVICES
// value that is not a plain device list (digits, GPU-/MIG- UUIDs) has its
// other characters replaced by '_', and is cut at 128 characters.
RankInfo RankInfoFor(const RankPlan& plan);

// trellis_build_info{version} = 1.
void AddBuildInfo(prometheus::Registry& registry, const std::string& version);

// A step record field (an index into kStepFields) exported as a series:
// counters add each record's value, gauges hold the latest. Fields without one
// (e.g. the per-part memory peaks) are not exported; alloc_retries, a
// cumulative count, has its own counter.
struct StepFieldMetric {
  size_t field;
  const char* name;
  const char* help;
  // Counters of fields every record carries start at 0 with the rank (a rate
  // over the first records then counts them); other series appear with a value.
  bool at_start;
};
// The tables (for the schema test).
std::vector<StepFieldMetric> StepFieldCounters();
std::vector<StepFieldMetric> StepFieldGauges();

class RankMetrics {
 public:
  // Registers every family in `registry`, which must outlive this object.
  RankMetrics(prometheus::Registry& registry, std::string run, std::string node);
  RankMetrics(const RankMetrics&) = delete;
  RankMetrics& operator=(const RankMetrics&) = delete;

  // Before the rank starts: its info series and its counters at zero.
  void OnStart(int rank, const RankInfo& info);
  // A record the rank sent, `received` being when the worker read it.
  void OnStep(int rank, const StepRecord& record, std::chrono::system_clock::time_point received);
  // Removes the rank's series; records that arrive for it later are ignored.
  void OnRankEnded(int rank);

 private:
  // A rank's series; nullptr until created. sums and gauges follow the tables.
  struct Series {
    prometheus::Labels labels;
    std::optional<int64_t> last_step;  // of the last record counted
    int64_t alloc_retries_seen = 0;    // the largest cumulative count seen
    prometheus::Gauge* info = nullptr;
    prometheus::Counter* steps = nullptr;
    prometheus::Counter* alloc_retries = nullptr;
    prometheus::Gauge* received = nullptr;
    std::vector<prometheus::Counter*> sums;
    std::vector<prometheus::Gauge*> gauges;
  };

  Series& SeriesOf(int rank);
  void RemoveSeries(Series& s);

  std::string run_;
  std::string node_;
  prometheus::Family<prometheus::Gauge>& info_;
  prometheus::Family<prometheus::Counter>& steps_;
  prometheus::Family<prometheus::Counter>& alloc_retries_;
  prometheus::Family<prometheus::Gauge>& received_;
  // Parallel to the tables of counted and gauged fields in rank_metrics.cc.
  std::vector<prometheus::Family<prometheus::Counter>*> sums_;
  std::vector<prometheus::Family<prometheus::Gauge>*> gauges_;
  std::map<int, Series> ranks_;
  std::set<int> ended_;
};

}  // namespace trellis::worker
