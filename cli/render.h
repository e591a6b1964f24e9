#pragma once
// The human-readable views of `ls`, `show` and `watch`. Pure: the caller
// passes `now` and the time zone choice, and prints the result.

#include <cstdint>
#include <optional>
#include <string>

#include "trellis/v1/controller.pb.h"

namespace trellis::cli {

struct TextOptions {
  int64_t now_ms = 0;  // for ages
  bool utc = false;    // times in UTC instead of local time
};

// Reasons longer than this are cut in the `ls` table (`show` prints them whole).
inline constexpr size_t kReasonWidth = 48;
// The same for the FROM column (a checkpoint directory's path may be long).
inline constexpr size_t kFromWidth = 32;

// `ls`: RUN, STATE, NODES, ATTEMPTS, STEP, LOSS, AGE, REASON; FROM before
// REASON when a run of the list started from a checkpoint ("tiny-moe-3@40").
std::string RenderRunList(const v1::ListRunsResponse& list, const TextOptions& opt);

// `show`: the run (with its restarts, when it may restart), its attempts,
// its launches and health events (render_launches.h), its event history and
// its recent steps;
// then, when the run carries its ranks' latest records (GetRun's
// include_ranks) and one of them has a GPU figure (StepColumns below), a
// table of them, a row per rank. CPU runs' output is as it always was.
std::string RenderRun(const v1::Run& run, const TextOptions& opt);
// "tiny-moe-1 at step 40 (weights)": where a run started from
// (training.init_from, trellis fork and retry); "" for a fresh start.
std::string LineageOf(const std::string& spec_toml);

// How many ranks `show` asks for (text; --json asks for the controller's page).
inline constexpr int kShowRankRows = 64;

// `watch`: the header printed for a snapshot (run, state, shape, step).
std::string RenderWatchHeader(const v1::Run& run, const TextOptions& opt);
// One state change: "12:03:04  RUNNING -> RESTARTING  reason".
std::string RenderTransition(const v1::RunEvent& event, const TextOptions& opt);
// The GPU figures a step may carry in `last` (the latest rank record of the
// step, as the controller keeps it): each is a column of the step tables only
// when a row has it, so CPU runs' tables look as they always did.
//   RETRIES        last.alloc_retries (the CUDA caching allocator's, since the rank started)
//   RESV_PEAK_GIB  last.mem_reserved_peak_bytes (peak reserved within the step), in GiB
//   NCCL_CTAS      last.nccl_max_ctas (CTAs per NCCL collective)
// and the MoE routing figures of [model] runs (the step's, the same on every rank):
//   EXPERT_LOAD    last.expert_load_max_over_mean (busiest expert over the mean, worst layer)
//   EP_LOAD        last.ep_load_max_over_mean (busiest EP rank over the mean, worst layer)
struct StepColumns {
  bool retries = false;
  bool reserved = false;
  bool ctas = false;
  bool expert_load = false;
  bool ep_load = false;

  bool any() const { return retries || reserved || ctas || expert_load || ep_load; }
  // True when every column `other` has is here too.
  bool Covers(const StepColumns& other) const {
    return (retries || !other.retries) && (reserved || !other.reserved) &&
           (ctas || !other.ctas) && (expert_load || !other.expert_load) &&
           (ep_load || !other.ep_load);
  }
  StepColumns& operator|=(const StepColumns& other) {
    retries = retries || other.retries;
    reserved = reserved || other.reserved;
    ctas = ctas || other.ctas;
    expert_load = expert_load || other.expert_load;
    ep_load = ep_load || other.ep_load;
    return *this;
  }
};
StepColumns ColumnsOf(const v1::StepSummary& step);

// The live step table's header and rows (fixed widths: rows arrive one by
// one). `total_steps`, when known, adds a progress column; `columns` the GPU
// figures (a row without one shows "-").
std::string RenderStepHeader(std::optional<int64_t> total_steps, StepColumns columns = {});
std::string RenderStepRow(const v1::StepSummary& step, std::optional<int64_t> total_steps,
                          StepColumns columns = {});
// "[#####.....]  50%" for `done` of `total`, `width` marks wide.
std::string ProgressBar(int64_t done, int64_t total, int width);

// The training steps a run's spec asks for, when its spec says ([model]
// runs); nullopt for generic commands or a spec this binary cannot read.
std::optional<int64_t> TotalSteps(const std::string& spec_toml);

}  // namespace trellis::cli
