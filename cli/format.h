#pragma once
// Pure presentation for the CLI: state names, durations, ages, times, tables,
// and the documented JSON mapping (cli/README.md). No I/O.

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trellis/v1/controller.pb.h"

namespace trellis::cli {

using Json = nlohmann::ordered_json;

// "RUNNING" for RUN_STATE_RUNNING; "UNSPECIFIED" for 0; "STATE_<n>" for a
// value this binary does not know (a newer controller).
std::string StateName(v1::RunState state);
bool IsTerminal(v1::RunState state);

// "850ms", "45s", "3m12s", "2h05m", "3d04h"; negative durations clamp to 0.
std::string FormatDuration(std::chrono::milliseconds d);
// Coarse age for tables: "12s", "3m", "2h", "5d"; "-" when `then_ms` is 0.
std::string FormatAge(int64_t now_ms, int64_t then_ms);
// "2024-05-01 12:03:04" in local time (or UTC), "-" when `unix_ms` is 0.
std::string FormatTime(int64_t unix_ms, bool utc);
// Cut to `width` characters, the last three replaced by "..." when cut.
std::string Truncate(std::string_view s, size_t width);
// "2x4": nodes x ranks per node.
std::string FormatShape(int nodes, int ranks_per_node);
// Four significant decimals ("2.3456"); "-" for NaN.
std::string FormatLoss(double loss);
// tokens / seconds, human-scaled: "950", "12.3k", "4.56M"; "-" when seconds <= 0.
std::string FormatRate(int64_t tokens, double seconds);
// "1.23" seconds, two decimals.
std::string FormatSeconds(double seconds);
// Bytes in GiB, two decimals: "61.70".
std::string FormatGiB(int64_t bytes);
// A ratio with two decimals and an x: "1.07x".
std::string FormatRatio(double ratio);
// The text, or "-" for an empty one (a table cell, a field not set).
std::string OrDash(const std::string& s);

// What `trellis retry RUN` adds to the controller's refusal when RUN has no
// complete checkpoint to go on from (its training.init_from "RUN@latest"):
// the plain fact and the way out (--fresh); "" for any other refusal.
std::string RetryRefusalHint(const std::string& run, const std::string& refusal);

// `trellis logs --since`: "90s", "10m", "2h", "1d" before `now_ms`, or a time
// "2026-12-07T16:05:00Z" (UTC), "2026-12-07 16:05[:00]" (local time, as the
// CLI prints times). The Unix milliseconds, or nullopt with *error saying what
// is accepted.
std::optional<int64_t> ParseSince(const std::string& text, int64_t now_ms, std::string* error);

// A text table: a header row, left-aligned columns separated by two spaces,
// no trailing spaces.
class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void AddRow(std::vector<std::string> row);
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// JSON mapping. Field names are the proto's; states are StateName(); int64
// values are JSON numbers. Documented in cli/README.md.
Json SummaryToJson(const v1::RunSummary& s);
Json AttemptToJson(const v1::Attempt& a);
Json EventToJson(const v1::RunEvent& e);
// A launch: its evidence_json as sent (text) and, parsed, under "evidence".
Json LaunchToJson(const v1::Launch& l);
Json HealthEventToJson(const v1::HealthEvent& e);
Json StepRecordToJson(const v1::StepRecord& r);
Json StepToJson(const v1::StepSummary& s);
// Also "launches", "health_events" and "max_restarts" (the spec's; null when
// this binary cannot read the spec). With `with_ranks` (show, which asks
// GetRun for them), also "ranks" (the latest record of each rank),
// "ranks_world", "ranks_reported" and "ranks_next".
Json RunToJson(const v1::Run& run, bool with_ranks = false);
Json RankLatestToJson(const v1::RankLatest& r);
Json RunListToJson(const v1::ListRunsResponse& list);
Json WatchEventToJson(const v1::WatchRunEvent& e);
Json SubmitToJson(const v1::SubmitRunResponse& r, bool dry_run);

}  // namespace trellis::cli
