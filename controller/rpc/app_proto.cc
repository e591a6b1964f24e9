#include "controller/rpc/app_proto.h"

#include <algorithm>

#include "common/spec/run_spec.h"
#include "common/spec/spec_writer.h"
#include "controller/app/spare_pools.h"

namespace trellis::controller {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbers.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

v1::RunState ToProto(RunState s) {
  return static_cast<v1::RunState>(static_cast<int>(s) + 1);  // after RUN_STATE_UNSPECIFIED
}

void ToProto(const RunView& v, v1::RunSummary* out) {
  const RunRecord& r = v.run;
  out->set_run_id(r.run_id);
  out->set_name(r.name);
  out->set_user(r.user);
  out->set_state(ToProto(r.state));
  out->set_state_reason(r.state_reason);
  out->set_nodes(r.nodes);
  out->set_ranks_per_node(r.ranks_per_node);
  // The run's attempts so far: one that waits ahead, or waited and was not
  // needed, is listed with them but not counted.
  out->set_attempts(static_cast<int32_t>(std::count_if(
      v.attempts.begin(), v.attempts.end(), [](const AttemptRecord& a) { return !a.waiting; })));
  out->set_created_unix_ms(ToUnixMillis(r.created));
  out->set_updated_unix_ms(ToUnixMillis(r.updated));
  out->set_last_step(v.last_step);
  out->set_last_loss(v.last_loss);
  out->set_unstored_step_records(v.unstored_step_records);
  if (v.hang_timeout) {
    out->set_hang_timeout_s(v.hang_timeout->seconds);
    out->set_hang_timeout_basis(v.hang_timeout->basis);
  }
  if (r.spec_toml.find("init_from") != std::string::npos) {  // no parse for the others
    spec::FieldErrors errors;
    auto spec = spec::ParseRunSpec(r.spec_toml, &errors);
    if (spec && spec->has_model) out->set_init_from(spec::InitFromSource(spec->trainer.training));
  }
  out->set_restarts(r.restarts);
  int relaunches = 0, restart_attempts = 0;
  for (const auto& l : v.launches) {
    relaunches += l.recovery == "relaunch";
    restart_attempts += l.recovery == "new_attempt" && l.failure_class != "gate" &&
                        l.failure_class != "time_limit" && l.failure_class != "handoff" &&
                        l.failure_class != "preemption";
  }
  out->set_relaunches(relaunches);
  out->set_restart_attempts(restart_attempts);
  if (v.goodput) {
    auto seconds = [](Goodput::Span d) { return std::chrono::duration<double>(d).count(); };
    v1::StateSeconds* st = out->mutable_state_seconds();
    st->set_queued(seconds(v.goodput->queued));
    st->set_gating(seconds(v.goodput->gating));
    st->set_running(seconds(v.goodput->running));
    st->set_redone(seconds(v.goodput->redone));
    st->set_handoff(seconds(v.goodput->handoff));
    st->set_restarting(seconds(v.goodput->restarting));
    out->set_goodput_ratio(v.goodput->ratio());
  }
}

namespace {
std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}
}  // namespace

void ToProto(const LaunchRecord& l, v1::Launch* out) {
  out->set_attempt(l.attempt);
  out->set_launch(l.launch);
  for (const auto& n : SplitCommas(l.nodes)) out->add_nodes(n);
  out->set_started_unix_ms(ToUnixMillis(l.started));
  out->set_ended_unix_ms(l.ended ? ToUnixMillis(*l.ended) : 0);
  out->set_failure_class(l.failure_class);
  out->set_exit_code(l.exit_code.value_or(0));
  out->set_reason(l.reason);
  out->set_blamed_node(l.blamed_node);
  out->set_evidence_json(l.evidence_json);
  out->set_recovery(l.recovery);
}

void ToProto(const HealthEventRecord& e, v1::HealthEvent* out) {
  out->set_attempt(e.attempt);
  out->set_launch(e.launch);
  out->set_unix_ms(ToUnixMillis(e.time));
  out->set_kind(e.kind);
  out->set_rank(e.rank);
  out->set_node(e.node);
  out->set_detail(e.detail);
  out->set_detail_json(e.detail_json);
}

void ToProto(const EventRecord& e, v1::RunEvent* out) {
  out->set_unix_ms(ToUnixMillis(e.time));
  out->set_from(ToProto(e.from));
  out->set_to(ToProto(e.to));
  out->set_reason(e.reason);
  out->set_evidence_json(e.evidence_json);
}

void ToProto(const StepRow& s, v1::StepSummary* out) {
  out->set_attempt(s.attempt);
  out->set_launch(s.launch);
  out->set_step(s.step);
  out->set_ranks(s.ranks);
  out->set_loss(s.ranks > 0 ? s.loss_sum / s.ranks : 0);
  out->set_tokens(s.tokens);
  out->set_step_seconds(s.step_seconds_max);
  std::string error;
  if (auto rec = DecodeStepRecord(s.last_json, &error)) ToProto(*rec, out->mutable_last());
}

void ToProto(const RunView& v, v1::Run* out) {
  ToProto(v, out->mutable_summary());
  out->set_spec_toml(v.run.spec_toml);
  out->set_run_dir(v.run.run_dir);
  for (const auto& a : v.attempts) {
    auto* pa = out->add_attempts();
    pa->set_attempt(a.attempt);
    pa->set_slurm_job_id(a.slurm_job_id);
    pa->set_launches(a.launches);
    for (const auto& arg : a.sbatch_args) pa->add_sbatch_args(arg);
    for (const auto& n : SplitCommas(a.nodelist)) pa->add_nodes(n);
    pa->set_exit_code(a.exit_code.value_or(0));
    pa->set_end_reason(a.end_reason);
    pa->set_submitted_unix_ms(ToUnixMillis(a.submitted));
    pa->set_ended_unix_ms(a.ended ? ToUnixMillis(*a.ended) : 0);
    pa->set_waiting(a.waiting);
    pa->set_begin_unix_ms(a.begin ? ToUnixMillis(*a.begin) : 0);
  }
  for (const auto& e : v.events) ToProto(e, out->add_events());
  for (const auto& s : v.recent_steps) ToProto(s, out->add_recent_steps());
  for (const auto& l : v.launches) ToProto(l, out->add_launches());
  for (const auto& e : v.health_events) ToProto(e, out->add_health_events());
  for (const auto& p : v.pool_jobs) {
    auto* pp = out->add_spare_pool_jobs();
    pp->set_pool(p.pool);
    pp->set_slurm_job_id(p.job_id);
    pp->set_nodes_asked(p.nodes_asked);
    for (const auto& n : PoolNodes(p)) pp->add_nodes(n);
    pp->set_submitted_unix_ms(ToUnixMillis(p.submitted));
    pp->set_standing_unix_ms(p.standing_since ? ToUnixMillis(*p.standing_since) : 0);
    pp->set_drawn_attempt(p.drawn_attempt);
    pp->set_drawn_launch(p.drawn_launch);
    pp->set_ended_unix_ms(p.ended ? ToUnixMillis(*p.ended) : 0);
    pp->set_end_reason(p.end_reason);
  }
  if (v.ranks) {
    out->set_ranks_world(v.ranks->world);
    out->set_ranks_reported(v.ranks->reported);
    out->set_ranks_next(v.ranks->next);
    for (const auto& r : v.ranks->ranks) ToProto(r, out->add_ranks());
  }
}

void ToProto(const RankLatest& r, v1::RankLatest* out) {
  out->set_attempt(r.attempt);
  out->set_launch(r.launch);
  out->set_rank(r.rank);
  out->set_node(r.node);
  ToProto(r.record, out->mutable_record());
  out->set_received_unix_ms(ToUnixMillis(r.received));
}

void ToProto(const GateAnswer& a, v1::GateDecision* out) {
  switch (a.kind) {
    case GateAnswer::kGo: out->set_decision(v1::GateDecision::DECISION_GO); break;
    case GateAnswer::kAbort: out->set_decision(v1::GateDecision::DECISION_ABORT); break;
    case GateAnswer::kStandby: out->set_decision(v1::GateDecision::DECISION_STANDBY); break;
  }
  out->set_reason(a.reason);
  out->set_node_index(a.node_index);
  out->set_rank_offset(a.rank_offset);
  out->set_ranks_per_node(a.ranks_per_node);
  out->set_world_size(a.world_size);
  out->set_master_addr(a.master_addr);
  out->set_master_port(a.master_port);
  out->set_resume_step(a.resume_step);
  out->set_checkpoint_dir(a.checkpoint_dir);
  for (const auto& root : a.data_roots) out->add_data_roots(root);
  out->set_mtbf_seconds(a.mtbf_s);
}

void ToProto(const NextLaunchAnswer& a, v1::NextLaunchResponse* out) {
  out->set_action(a.relaunch ? v1::NextLaunchResponse::ACTION_RELAUNCH
                             : v1::NextLaunchResponse::ACTION_EXIT);
  out->set_next_launch(a.next_launch);
  for (const auto& n : a.nodes) out->add_nodes(n);
  for (const auto& job : a.other_jobs) {
    v1::JobNodes* j = out->add_other_jobs();
    j->set_job_id(job.job_id);
    for (const auto& n : job.nodes) j->add_nodes(n);
  }
  out->set_exit_code(a.exit_code);
  out->set_reason(a.reason);
}

RankExitInfo FromProto(const v1::RankExit& r, const std::string& node) {
  RankExitInfo e;
  e.node = node;
  e.rank = r.rank();
  e.exit_code = r.exit_code();
  e.signal = r.signal();
  e.after_stop = r.after_stop();
  // Bounded: evidence from a worker is data, never trusted for size.
  for (int i = 0; i < r.markers_size() && i < 16; ++i)
    e.markers.push_back(r.markers(i).substr(0, 32));
  e.evidence_line = r.evidence().substr(0, 512);
  return e;
}

WorkerReport FromProto(const v1::ReportExitRequest& req) {
  WorkerReport report;
  for (const auto& r : req.ranks()) report.ranks.push_back(FromProto(r, req.id().node()));
  report.oom_kills = req.oom_kills();
  report.time_limit_warned = req.planned_stop() == "time_limit";
  report.exit_code = req.exit_code();
  report.reason = req.reason().substr(0, 1024);
  report.unstored_step_records = req.unstored_step_records();
  return report;
}

WorkerId FromProto(const v1::WorkerIdentity& id) {
  return {id.run_id(), id.attempt(), id.launch(), id.node(), id.secret()};
}

}  // namespace trellis::controller

namespace trellis::controller {

NodeProbe ProbeFromWorker(const v1::NodeProbe& p) {
  NodeProbe out = trellis::FromProto(p);
  // Bounded: a worker's text is data, never trusted for size.
  if (out.error.size() > 1024) out.error.resize(1024);
  return out;
}

void ToProto(const NodeStatusView& n, WallTime now, v1::NodeStatus* out) {
  (void)now;
  out->set_name(n.entry.node);
  out->set_state(NodeHealthName(n.health));
  out->set_reason(n.entry.reason);
  out->set_evidence_json(n.entry.evidence_json);
  out->set_since_unix_ms(ToUnixMillis(n.entry.since));
  out->set_expiry_unix_ms(n.entry.expiry ? ToUnixMillis(*n.entry.expiry) : 0);
  out->set_strikes(n.entry.strikes);
  out->set_actor(n.entry.actor);
  if (const auto& c = n.entry.last_check) {
    out->set_check_job_id(c->job_id);
    out->set_check_started_unix_ms(ToUnixMillis(c->started));
    out->set_check_ended_unix_ms(c->ended ? ToUnixMillis(*c->ended) : 0);
    out->set_check_passed(c->passed);
    out->set_check_summary(c->summary);
  }
}

void ToProto(const GateReportView& r, v1::GateReportResponse* out) {
  out->set_run_id(r.run_id);
  for (const auto& g : r.records) {
    auto* o = out->add_gates();
    o->set_attempt(g.attempt);
    o->set_launch(g.launch);
    o->set_decision(g.decision);
    o->set_reason(g.reason);
    o->set_unix_ms(ToUnixMillis(g.time));
    o->set_policy_json(g.policy_json);
    for (const auto& n : g.nodes) {
      auto* on = o->add_nodes();
      on->set_node(n.node);
      on->set_decision(n.decision);
      for (const auto& reason : n.reasons) on->add_reasons(reason);
      on->set_score(n.score);
      ToProto(n.probe, on->mutable_probe());
    }
  }
}

}  // namespace trellis::controller
