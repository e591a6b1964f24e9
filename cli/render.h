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

// `ls`: RUN, STATE, NODES, ATTEMPTS, STEP, LOSS, AGE, REASON.
std::string RenderRunList(const v1::ListRunsResponse& list, const TextOptions& opt);

// `show`: the run, its attempts, its event history and its recent steps.
std::string RenderRun(const v1::Run& run, const TextOptions& opt);

// `watch`: the header printed for a snapshot (run, state, shape, step).
std::string RenderWatchHeader(const v1::Run& run, const TextOptions& opt);
// One state change: "12:03:04  RUNNING -> RESTARTING  reason".
std::string RenderTransition(const v1::RunEvent& event, const TextOptions& opt);
// The live step table's header and rows (fixed widths: rows arrive one by
// one). `total_steps`, when known, adds a progress column.
std::string RenderStepHeader(std::optional<int64_t> total_steps);
std::string RenderStepRow(const v1::StepSummary& step, std::optional<int64_t> total_steps);
// "[#####.....]  50%" for `done` of `total`, `width` marks wide.
std::string ProgressBar(int64_t done, int64_t total, int width);

// The training steps a run's spec asks for, when its spec says ([model]
// runs); nullopt for generic commands or a spec this binary cannot read.
std::optional<int64_t> TotalSteps(const std::string& spec_toml);

}  // namespace trellis::cli
