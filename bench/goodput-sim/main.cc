// goodput_sim: runs every row of rows.cc over the seeds' failure traces and
// prints one JSON document (bench/goodput-sim/run.sh turns it into the
// results table). Output only; the simulation is simulator.cc.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/goodput-sim/rows.h"
#include "bench/goodput-sim/simulator.h"
#include "bench/goodput-sim/trace.h"
#include "controller/core/failure_class.h"

namespace trellis::bench {
namespace {

using nlohmann::json;

double Hours(int64_t ms) { return static_cast<double>(ms) / 3.6e6; }
double Pct(int64_t ms, int64_t of) { return of > 0 ? 100.0 * static_cast<double>(ms) / of : 0; }
// A whole number as an integer, as the results written before it was a double.
json Seconds(double s) { return s == std::floor(s) ? json(static_cast<int64_t>(s)) : json(s); }

json ScenarioJson(const Scenario& s) {
  return {{"nodes_needed", s.nodes_needed},
          {"ranks_per_node", s.ranks_per_node},
          {"cluster_nodes", s.cluster_nodes},
          {"horizon_days", s.horizon_s / 86400.0},
          {"interruptions", s.interruptions},
          {"share_node_evidence", s.share_node_evidence},
          {"share_no_evidence", s.share_no_evidence},
          {"crash_detect_s", s.crash_detect_s},
          {"exit_detect_s", s.exit_detect_s},
          {"hang_timeout_s", s.hang_timeout_s},
          {"checkpoint_every_s", s.checkpoint_every_s},
          {"checkpoint_stall_s", Seconds(s.checkpoint_stall_s)},
          {"checkpoint_write_s", s.checkpoint_write_s},
          {"relaunch_s", s.relaunch_s},
          {"queue_median_s", s.queue_median_s},
          {"queue_sigma", s.queue_sigma},
          {"job_start_s", s.job_start_s},
          {"time_limit_s", s.time_limit_s},
          {"repeat_mean_s", s.repeat_mean_s},
          {"site_repair_s", s.site_repair_s}};
}

constexpr FaultKind kKinds[] = {FaultKind::kDeviceError, FaultKind::kNodeLost,
                                FaultKind::kNcclOneNode, FaultKind::kNcclEverywhere,
                                FaultKind::kSameExit,    FaultKind::kHang};

// Every fault kind, 0 where none: stable keys.
json ByKind(const std::map<std::string, int>& counts) {
  json out = json::object();
  for (FaultKind k : kKinds) {
    auto it = counts.find(std::string(FaultKindName(k)));
    out[std::string(FaultKindName(k))] = it == counts.end() ? 0 : it->second;
  }
  return out;
}

// Every failure class, 0 where none.
json ByClass(const std::map<std::string, int>& counts) {
  json out = json::object();
  for (int c = 0; c <= static_cast<int>(trellis::controller::FailureClass::kCancel); ++c) {
    std::string name(
        trellis::controller::FailureClassName(static_cast<trellis::controller::FailureClass>(c)));
    auto it = counts.find(name);
    out[name] = it == counts.end() ? 0 : it->second;
  }
  return out;
}

json ResultJson(uint64_t seed, const SimResult& r) {
  const Ledger& l = r.ledger;
  const Counts& c = r.counts;
  auto count = [](const std::map<std::string, int>& m) {
    int n = 0;
    for (const auto& [k, v] : m) n += v;
    return n;
  };
  int node = 0, none = 0, hang = 0;
  for (FaultKind k : kKinds) {
    auto it = c.interruptions.find(std::string(FaultKindName(k)));
    if (it == c.interruptions.end()) continue;
    FaultGroup g = GroupOf(k);
    (g == FaultGroup::kNodeEvidence ? node : g == FaultGroup::kNoEvidence ? none : hang) +=
        it->second;
  }
  return {
      {"seed", seed},
      {"effective_pct", 100.0 * r.effective_ratio()},
      {"compute_goodput_pct", 100.0 * r.check.goodput.ratio()},
      {"goodput_check_agrees", r.check.agrees},
      {"goodput_check_mismatch", r.check.mismatch},
      {"lost_pct",
       {{"checkpoint_stalls", Pct(l.stall_ms, r.horizon_ms)},
        {"redone", Pct(l.redone_ms, r.horizon_ms)},
        {"detection", Pct(l.detection_ms, r.horizon_ms)},
        {"relaunch", Pct(l.relaunch_ms, r.horizon_ms)},
        {"backoff", Pct(l.backoff_ms, r.horizon_ms)},
        {"queue_wait", Pct(l.queue_ms, r.horizon_ms)},
        {"job_start", Pct(l.start_ms, r.horizon_ms)},
        {"handoff", Pct(l.handoff_ms, r.horizon_ms)},
        {"after_run_failed", Pct(l.after_fail_ms, r.horizon_ms)}}},
      {"hours",
       {{"productive", Hours(l.productive_ms)},
        {"checkpoint_stalls", Hours(l.stall_ms)},
        {"redone", Hours(l.redone_ms)},
        {"detection", Hours(l.detection_ms)},
        {"relaunch", Hours(l.relaunch_ms)},
        {"backoff", Hours(l.backoff_ms)},
        {"queue_wait", Hours(l.queue_ms)},
        {"job_start", Hours(l.start_ms)},
        {"handoff", Hours(l.handoff_ms)},
        {"after_run_failed", Hours(l.after_fail_ms)}}},
      {"interruptions",
       {{"node_evidence", node},
        {"no_evidence", none},
        {"hang", hang},
        {"repeat_of_faulty_node", count(c.repeats)},
        {"time_limit", c.time_limit_stops},
        {"trace_while_not_running", c.trace_idle}}},
      {"interruptions_by_kind", ByKind(c.interruptions)},
      {"repeats_by_kind", ByKind(c.repeats)},
      {"verdict_classes", ByClass(c.verdicts)},
      {"attempts", c.attempts},
      {"new_attempts_after_failure", c.new_attempts_after_failure},
      {"relaunches", c.relaunches},
      {"restarts_used", c.restarts_used},
      {"strikes", c.strikes},
      {"nodes_quarantined", c.nodes_quarantined},
      {"run_failed", c.run_failed},
      {"fail_reason", c.fail_reason},
      // Part of lost_pct's queue_wait and backoff.
      {"queue_wait_after_time_limit_pct", Pct(c.queue_after_time_limit_ms, r.horizon_ms)},
      {"continuations_ahead",
       {{"submitted", c.ahead_submitted},
        {"lead_s_mean", c.ahead_submitted > 0 ? static_cast<double>(c.ahead_lead_s_sum) /
                                                    c.ahead_submitted
                                              : 0.0},
        {"handoffs", c.handoffs},
        {"waited_at_time_limit", c.ahead_waited_at_limit},
        {"taken_after_failure", c.ahead_taken_after_failure}}},
      {"spare_pool",
       {{"jobs_submitted", c.pool.jobs_submitted},
        {"draws", c.pool.draws},
        {"queued_at_need", c.pool.queued_at_need},
        {"expired_standing", c.pool.expired},
        {"replaced_short", c.pool.replaced_short},
        {"drawn_outlived", c.pool.drawn_outlived},
        {"standing_hours", Hours(c.pool.standing_ms)}}},
      {"certified_return",
       {{"checks", c.certify.checks},
        {"failed", c.certify.failed},
        {"passed_faulty", c.certify.passed_faulty}}}};
}

// The mean over seeds of every number in the per-seed results (recursively;
// a key missing in a seed counts as 0).
json MeanOf(const std::vector<json>& per_seed) {
  const json& first = per_seed.front();
  if (first.is_number()) {
    double sum = 0;
    for (const auto& s : per_seed) sum += s.get<double>();
    return sum / static_cast<double>(per_seed.size());
  }
  if (!first.is_object()) return nullptr;
  std::set<std::string> keys;
  for (const auto& s : per_seed)
    for (const auto& [key, value] : s.items()) keys.insert(key);
  json out = json::object();
  for (const auto& key : keys) {
    if (key == "seed") continue;
    std::vector<json> column;
    for (const auto& s : per_seed) column.push_back(s.contains(key) ? s[key] : json(0));
    json mean = MeanOf(column);
    if (!mean.is_null()) out[key] = mean;
  }
  return out;
}

}  // namespace
}  // namespace trellis::bench

int main(int argc, char** argv) {
  using namespace trellis::bench;
  CLI::App app{"Goodput of a failure trace under the controller's real decisions"};
  std::vector<uint64_t> seeds = {1, 2, 3, 4, 5};
  std::vector<std::string> only;
  app.add_option("--seeds", seeds, "trace seeds");
  app.add_option("--rows", only, "row keys to run (default: all)");
  CLI11_PARSE(app, argc, argv);

  const Scenario base;
  nlohmann::json doc;
  doc["scenario"] = ScenarioJson(base);
  doc["seeds"] = seeds;
  doc["rows"] = nlohmann::json::array();
  std::set<std::string> wanted(only.begin(), only.end());
  for (const Row& row : BenchRows()) {
    if (!wanted.empty() && !wanted.count(row.strategy.key)) continue;
    std::vector<nlohmann::json> per_seed;
    for (uint64_t seed : seeds) {
      std::vector<TraceEvent> trace = MakeTrace(row.scenario, seed);
      per_seed.push_back(ResultJson(seed, Simulate(row.scenario, row.strategy, trace, seed)));
    }
    double lo = 100, hi = 0;
    bool agrees = true;
    for (const auto& s : per_seed) {
      lo = std::min(lo, s["effective_pct"].get<double>());
      hi = std::max(hi, s["effective_pct"].get<double>());
      agrees = agrees && s["goodput_check_agrees"].get<bool>();
    }
    nlohmann::json changes = nlohmann::json::object();
    nlohmann::json mine = ScenarioJson(row.scenario), theirs = ScenarioJson(base);
    for (const auto& [k, v] : mine.items())
      if (v != theirs[k]) changes[k] = v;
    const Strategy& st = row.strategy;
    doc["rows"].push_back({{"key", st.key},
                           {"label", st.label},
                           {"assumption_change", st.assumption_change},
                           {"mechanism", st.mechanism},
                           {"strategy",
                            {{"spares", st.spares},
                             {"quarantine", st.quarantine},
                             {"relaunch_in_allocation", st.relaunch_in_allocation},
                             {"backoff_s", st.backoff_s},
                             {"backoff_reset_s", st.backoff_reset_s},
                             {"max_restarts", st.max_restarts},
                             {"quarantine_repairs", st.quarantine_repairs},
                             {"continuation", st.continuation_ahead ? "ahead" : "after"},
                             {"continuation_lead_s", st.continuation_lead_s},
                             {"signal_grace_s", st.signal_grace_s},
                             {"checkpoint_auto", st.checkpoint_auto},
                             {"spare_pool_nodes", st.spare_pool_nodes},
                             {"certify_return", st.certify_return},
                             {"certify_catch", st.certify_catch},
                             {"certify_check_s", st.certify_check_s}}},
                           {"scenario_changes", changes},
                           {"effective_pct_min", lo},
                           {"effective_pct_max", hi},
                           {"goodput_check_agrees", agrees},
                           {"mean", MeanOf(per_seed)},
                           {"per_seed", per_seed}});
  }
  std::cout << doc.dump(2) << "\n";
  return 0;
}
