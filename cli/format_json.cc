// The JSON mapping of the CLI (cli/README.md documents it). Hand-written
// rather than protobuf's JSON printer so that states read "RUNNING", int64
// values stay numbers, and `show` is one flat object.

#include <cmath>

#include "cli/format.h"
#include "cli/render.h"
#include "cli/render_launches.h"
#include "proto/step_record_proto.h"

namespace trellis::cli {

namespace {

// NaN and infinities have no JSON spelling: null.
Json Number(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

Json Strings(const google::protobuf::RepeatedPtrField<std::string>& values) {
  Json out = Json::array();
  for (const auto& v : values) out.push_back(v);
  return out;
}

// The controller stores evidence as JSON text: embed it as JSON. Text that
// does not parse is kept as a string rather than lost.
Json Evidence(const std::string& text) {
  if (text.empty()) return nullptr;
  Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? Json(text) : parsed;
}

}  // namespace

Json SummaryToJson(const v1::RunSummary& s) {
  Json out{{"run_id", s.run_id()},
           {"name", s.name()},
           {"user", s.user()},
           {"state", StateName(s.state())},
           {"state_reason", s.state_reason()},
           {"nodes", s.nodes()},
           {"ranks_per_node", s.ranks_per_node()},
           {"attempts", s.attempts()},
           {"created_unix_ms", s.created_unix_ms()},
           {"updated_unix_ms", s.updated_unix_ms()},
           {"last_step", s.last_step()},
           {"last_loss", s.last_step() < 0 ? Json(nullptr) : Number(s.last_loss())},
           {"unstored_step_records", s.unstored_step_records()},
           {"init_from", s.init_from()},
           {"hang_timeout_s", Number(s.hang_timeout_s())},
           {"hang_timeout_basis", s.hang_timeout_basis()},
           {"restarts", s.restarts()},
           {"relaunches", s.relaunches()},
           {"restart_attempts", s.restart_attempts()}};
  if (s.has_state_seconds()) {  // GetRun's and WatchRun's, not ListRuns'
    const v1::StateSeconds& t = s.state_seconds();
    out["goodput_ratio"] = Number(s.goodput_ratio());
    out["state_seconds"] = Json{{"queued", Number(t.queued())},
                                {"gating", Number(t.gating())},
                                {"running", Number(t.running())},
                                {"redone", Number(t.redone())},
                                {"restarting", Number(t.restarting())},
                                {"handoff", Number(t.handoff())}};
  }
  return out;
}

Json AttemptToJson(const v1::Attempt& a) {
  return Json{{"attempt", a.attempt()},
              {"slurm_job_id", a.slurm_job_id()},
              {"launches", a.launches()},
              {"sbatch_args", Strings(a.sbatch_args())},
              {"nodes", Strings(a.nodes())},
              {"exit_code", a.exit_code()},
              {"end_reason", a.end_reason()},
              {"submitted_unix_ms", a.submitted_unix_ms()},
              {"ended_unix_ms", a.ended_unix_ms()},
              {"waiting", a.waiting()},
              {"begin_unix_ms", a.begin_unix_ms()}};
}

Json EventToJson(const v1::RunEvent& e) {
  return Json{{"unix_ms", e.unix_ms()},
              {"from", StateName(e.from())},
              {"to", StateName(e.to())},
              {"reason", e.reason()},
              {"evidence", Evidence(e.evidence_json())}};
}

Json LaunchToJson(const v1::Launch& l) {
  return Json{{"attempt", l.attempt()},
              {"launch", l.launch()},
              {"nodes", Strings(l.nodes())},
              {"started_unix_ms", l.started_unix_ms()},
              {"ended_unix_ms", l.ended_unix_ms()},
              {"failure_class", l.failure_class()},
              {"exit_code", l.exit_code()},
              {"reason", l.reason()},
              {"blamed_node", l.blamed_node()},
              {"recovery", l.recovery()},
              {"evidence_json", l.evidence_json()},
              {"evidence", Evidence(l.evidence_json())}};
}

Json HealthEventToJson(const v1::HealthEvent& e) {
  return Json{{"attempt", e.attempt()}, {"launch", e.launch()},
              {"unix_ms", e.unix_ms()}, {"kind", e.kind()},
              {"rank", e.rank()},       {"node", e.node()},
              {"detail", e.detail()},   {"detail_json", e.detail_json()}};
}

Json StepRecordToJson(const v1::StepRecord& message) {
  // Every field of the record's table; optional ones only when the rank
  // reported them.
  const StepRecord r = FromProto(message);
  Json out = Json::object();
  for (const StepField& f : kStepFields) {
    const std::string key(f.name);
    if (f.is_count()) {
      if (auto v = f.get_int(r)) out[key] = *v;
    } else if (auto v = f.get_double(r)) {
      out[key] = Number(*v);
    }
  }
  return out;
}

Json StepToJson(const v1::StepSummary& s) {
  double rate = s.step_seconds() > 0 ? static_cast<double>(s.tokens()) / s.step_seconds() : 0;
  Json out{{"attempt", s.attempt()},
           {"launch", s.launch()},
           {"step", s.step()},
           {"ranks", s.ranks()},
           {"loss", Number(s.loss())},
           {"tokens", s.tokens()},
           {"step_seconds", Number(s.step_seconds())},
           {"tokens_per_second", s.step_seconds() > 0 ? Number(rate) : Json(nullptr)}};
  if (s.has_last()) out["last"] = StepRecordToJson(s.last());
  return out;
}

Json RankLatestToJson(const v1::RankLatest& r) {
  return Json{{"attempt", r.attempt()},
              {"launch", r.launch()},
              {"rank", r.rank()},
              {"node", r.node()},
              {"received_unix_ms", r.received_unix_ms()},
              {"record", StepRecordToJson(r.record())}};
}

Json RunToJson(const v1::Run& run, bool with_ranks) {
  // The summary's fields at the top level; "attempts" is the list of attempts
  // here (the summary's count is its length).
  Json out = SummaryToJson(run.summary());
  out.erase("attempts");
  out["run_dir"] = run.run_dir();
  out["spec_toml"] = run.spec_toml();
  if (std::string from = LineageOf(run.spec_toml()); !from.empty()) out["from"] = from;
  Json attempts = Json::array();
  for (const auto& a : run.attempts()) attempts.push_back(AttemptToJson(a));
  out["attempts"] = std::move(attempts);
  std::optional<int> max_restarts = MaxRestarts(run.spec_toml());
  out["max_restarts"] = max_restarts ? Json(*max_restarts) : Json(nullptr);
  Json launches = Json::array();
  for (const auto& l : run.launches()) launches.push_back(LaunchToJson(l));
  out["launches"] = std::move(launches);
  Json health = Json::array();
  for (const auto& e : run.health_events()) health.push_back(HealthEventToJson(e));
  out["health_events"] = std::move(health);
  Json events = Json::array();
  for (const auto& e : run.events()) events.push_back(EventToJson(e));
  out["events"] = std::move(events);
  Json steps = Json::array();
  for (const auto& s : run.recent_steps()) steps.push_back(StepToJson(s));
  out["recent_steps"] = std::move(steps);
  if (with_ranks) {
    Json ranks = Json::array();
    for (const auto& r : run.ranks()) ranks.push_back(RankLatestToJson(r));
    out["ranks"] = std::move(ranks);
    out["ranks_world"] = run.ranks_world();
    out["ranks_reported"] = run.ranks_reported();
    out["ranks_next"] = run.ranks_next();
  }
  return out;
}

Json RunListToJson(const v1::ListRunsResponse& list) {
  Json out = Json::array();
  for (const auto& s : list.runs()) out.push_back(SummaryToJson(s));
  return out;
}

Json WatchEventToJson(const v1::WatchRunEvent& e) {
  switch (e.event_case()) {
    case v1::WatchRunEvent::kSnapshot:
      return Json{{"snapshot", RunToJson(e.snapshot())}};
    case v1::WatchRunEvent::kTransition:
      return Json{{"transition", EventToJson(e.transition())}};
    case v1::WatchRunEvent::kStep:
      return Json{{"step", StepToJson(e.step())}};
    case v1::WatchRunEvent::EVENT_NOT_SET:
      break;
  }
  return Json::object();
}

Json SubmitToJson(const v1::SubmitRunResponse& r, bool dry_run) {
  if (!dry_run) return Json{{"run_id", r.run_id()}};
  Json out{{"batch_script", r.batch_script()}, {"sbatch_args", Strings(r.sbatch_args())}};
  if (!r.resolved_spec().empty()) out["resolved_spec"] = r.resolved_spec();
  // A controller of an older version sends no policy: the key is left out.
  Json policy = Json::parse(r.gate_policy_json(), nullptr, false);
  if (policy.is_object()) out["gate_policy"] = std::move(policy);
  if (r.pool_sbatch_args_size() > 0) out["pool_sbatch_args"] = Strings(r.pool_sbatch_args());
  return out;
}

}  // namespace trellis::cli
