#include "common/spec/spec_writer.h"

#include <iomanip>
#include <limits>
#include <sstream>
#include <utility>

#include <toml++/toml.h>

namespace trellis::spec {
namespace {

// One section's `key = value` lines, each value in TOML's own syntax.
class Section {
 public:
  Section(std::string* out, const std::string& name) : out_(out) {
    *out_ += (out_->empty() ? "[" : "\n[") + name + "]\n";
  }
  void Str(const std::string& key, const std::string& v) { Line(key, Quote(v)); }
  void Int(const std::string& key, int64_t v) { Line(key, std::to_string(v)); }
  void Bool(const std::string& key, bool v) { Line(key, v ? "true" : "false"); }
  void Double(const std::string& key, double v) {
    // As many digits as read back to the same double; always a float literal.
    std::ostringstream o;
    o << std::setprecision(std::numeric_limits<double>::max_digits10) << v;
    std::string s = o.str();
    if (s.find_first_of(".eE") == std::string::npos) s += ".0";
    Line(key, s);
  }
  void Strs(const std::string& key, const std::vector<std::string>& v) {
    std::string list = "[";
    for (size_t i = 0; i < v.size(); ++i) list += (i ? ", " : "") + Quote(v[i]);
    Line(key, list + "]");
  }
  // Written as a comment: the key is absent, its default applies.
  // The value, or, when it is empty, the commented-out key saying what then.
  void StrOrUnset(const std::string& key, const std::string& v, const std::string& when_empty) {
    if (v.empty())
      Unset(key, when_empty);
    else
      Str(key, v);
  }
  void Unset(const std::string& key, const std::string& why) {
    *out_ += "# " + key + " = " + why + "\n";
  }

 private:
  static std::string Quote(const std::string& s) {
    std::ostringstream o;
    o << toml::value<std::string>(s);
    return o.str();
  }
  void Line(const std::string& key, const std::string& value) {
    *out_ += key + " = " + value + "\n";
  }
  std::string* out_;
};

void WriteJob(const RunSpec& s, std::string* out) {
  Section j(out, "job");
  j.Str("name", s.job.name);
  const auto& c = s.job.command;
  if (c.size() == 3 && c[0] == "/bin/sh" && c[1] == "-c")
    j.Str("command", c[2]);  // written as a string: it runs as `sh -c`
  else if (!c.empty())
    j.Strs("command", c);
  j.StrOrUnset("output_dir", s.job.output_dir, "\"\"  (the run id)");
}

void WriteSlurm(const RunSpec& s, std::string* out) {
  const SlurmSection& sl = s.slurm;
  Section w(out, "slurm");
  w.StrOrUnset("partition", sl.partition, "\"\"  (Slurm's default partition)");
  w.StrOrUnset("account", sl.account, "\"\"  (your default account)");
  w.Int("nodes", sl.nodes);
  w.Int("ranks_per_node", sl.ranks_per_node);
  w.Int("gpus_per_node", sl.gpus_per_node);
  w.Int("spare_nodes", sl.spare_nodes);
  if (sl.time_limit_minutes > 0)
    w.Int("time_limit", sl.time_limit_minutes);
  else
    w.Unset("time_limit", "the partition's default");
  w.Str("nodelist", sl.nodelist);
  w.Strs("extra_args", sl.extra_args);
  w.Int("signal_grace_s", sl.signal_grace_s);
}

void WriteGateRestartHealth(const RunSpec& s, std::string* out) {
  Section g(out, "gate");
  g.Double("min_free_gib_per_socket", s.gate.min_free_gib_per_socket);
  g.Double("max_unattributed_gib_per_socket", s.gate.max_unattributed_gib_per_socket);
  g.Int("timeout_s", s.gate.timeout_s);
  g.Bool("touch_probe", s.gate.touch_probe);
  const RestartSection& r = s.restart;
  Section w(out, "restart");
  w.Int("max_restarts", r.max_restarts);
  w.Int("backoff_s", r.backoff_s);
  w.Int("backoff_reset_s", r.backoff_reset_s);
  w.Int("hang_timeout_s", r.hang_timeout_s);
  w.Int("heartbeat_timeout_s", r.heartbeat_timeout_s);
  w.Int("startup_timeout_s", r.startup_timeout_s);
  w.Bool("relaunch_in_allocation", r.relaunch_in_allocation);
  w.Str("continuation", r.continuation);
  if (r.continuation_lead_s == 0)
    w.Str("continuation_lead_s", "auto");
  else
    w.Int("continuation_lead_s", r.continuation_lead_s);
  w.Int("spare_pool_nodes", r.spare_pool_nodes);
  w.Bool("retry_oom", r.retry_oom);
  w.Bool("hang_learned", r.hang_learned);
  w.Double("hang_floor_s", r.hang_floor_s);
  w.Double("hang_factor", r.hang_factor);
  w.Double("startup_floor_s", r.startup_floor_s);
  w.Double("startup_factor", r.startup_factor);
  const HealthSection& h = s.health;
  Section hw(out, "health");
  hw.Int("straggler_window", h.straggler_window);
  hw.Int("straggler_min_slow", h.straggler_min_slow);
  hw.Double("straggler_factor", h.straggler_factor);
  hw.Bool("straggler_strike", h.straggler_strike);
}

void WriteTrainer(const TrainerSpec& t, std::string* out) {
  const ModelSpec& m = t.model;
  Section mw(out, "model");
  mw.Int("layers", m.layers);
  mw.Int("hidden", m.hidden);
  mw.Int("heads", m.heads);
  mw.Int("kv_heads", m.kv_heads);
  mw.Int("experts", m.experts);
  mw.Int("experts_per_token", m.experts_per_token);
  mw.Int("expert_hidden", m.expert_hidden);
  mw.Int("expert_groups", m.expert_groups);
  mw.Int("vocab", m.vocab);
  mw.Bool("shared_expert", m.shared_expert);
  mw.Double("rope_theta", m.rope_theta);
  mw.Double("norm_eps", m.norm_eps);
  mw.Double("init_std", m.init_std);
  const ParallelSpec& p = t.parallel;
  Section pw(out, "parallel");
  pw.Int("node_size", p.node_size);
  pw.Int("ep", p.ep);
  pw.Str("grad_reduce_dtype", p.grad_reduce_dtype);
  pw.Bool("activation_checkpointing", p.activation_checkpointing);
  pw.Double("offload_fraction", p.offload_fraction);
  pw.Str("expert_gather_dtype", p.expert_gather_dtype);
  pw.Int("prefetch_layers", p.prefetch_layers);
  const TrainingSpec& tr = t.training;
  Section tw(out, "training");
  tw.Int("seq_len", tr.seq_len);
  tw.Int("global_batch", tr.global_batch);
  tw.Int("micro_batch", tr.micro_batch);
  tw.Int("steps", tr.steps);
  tw.Double("lr", tr.lr);
  tw.Int("seed", static_cast<int64_t>(tr.seed));
  tw.Str("data", tr.data);
  tw.Str("row_order", tr.row_order);
  tw.Int("warmup_steps", tr.warmup_steps);
  tw.Double("min_lr_ratio", tr.min_lr_ratio);
  tw.Double("weight_decay", tr.weight_decay);
  tw.Double("grad_clip", tr.grad_clip);
  tw.Double("adam_beta1", tr.adam_beta1);
  tw.Double("adam_beta2", tr.adam_beta2);
  tw.Double("adam_eps", tr.adam_eps);
  tw.Double("muon_lr", tr.muon_lr);
  tw.Double("muon_momentum", tr.muon_momentum);
  tw.Int("muon_ns_steps", tr.muon_ns_steps);
  tw.Str("muon_ns_dtype", tr.muon_ns_dtype);
  tw.Double("aux_loss_coef", tr.aux_loss_coef);
  tw.Double("router_bias_rate", tr.router_bias_rate);
  tw.Str("dtype", tr.dtype);
  tw.Str("device", tr.device);
  tw.Bool("deterministic", tr.deterministic);
  tw.StrOrUnset("init_from", tr.init_from, "\"\"  (fresh weights)");
  tw.Str("init_state", tr.init_state);
  const CheckpointSpec& c = t.checkpoint;
  Section cw(out, "checkpoint");
  if (c.every_steps_auto)
    cw.Str("every_steps", "auto");
  else
    cw.Int("every_steps", c.every_steps);
  cw.Double("auto_min_s", c.auto_min_s);
  cw.Double("auto_max_s", c.auto_max_s);
  cw.Int("keep", c.keep);
  cw.Bool("at_end", c.at_end);
  cw.Bool("async", c.async);
  cw.Double("async_keep_free_gib", c.async_keep_free_gib);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ResolvedKeyValues(const RunSpec& spec) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(ResolvedSpecToml(spec));
  std::string section;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (line[0] == '[') {
      section = line.substr(1, line.size() - 2);
      continue;
    }
    if (line.rfind("# ", 0) == 0) line = line.substr(2);
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    out.emplace_back(section + "." + line.substr(0, eq), line.substr(eq + 3));
  }
  return out;
}

namespace {

// Where init_from points, split: the run whose checkpoints DIR holds (else
// DIR itself) and the step.
std::pair<std::string, std::string> InitFromParts(const TrainingSpec& t) {
  const size_t at = t.init_from.rfind('@');
  std::string dir = at == std::string::npos ? t.init_from : t.init_from.substr(0, at);
  const std::string step = at == std::string::npos ? "latest" : t.init_from.substr(at + 1);
  const std::string suffix = "/checkpoints";
  if (dir.size() > suffix.size() &&
      dir.compare(dir.size() - suffix.size(), suffix.size(), suffix) == 0) {
    const std::string run_dir = dir.substr(0, dir.size() - suffix.size());
    const std::string run = run_dir.substr(run_dir.rfind('/') + 1);
    if (IsValidRunName(run)) dir = run;
  }
  return {dir, step};
}

}  // namespace

std::string DescribeInitFrom(const TrainingSpec& t) {
  if (t.init_from.empty()) return "";
  const auto [from, step] = InitFromParts(t);
  return from + " at step " + step + " (" + t.init_state + ")";
}

std::string InitFromSource(const TrainingSpec& t) {
  if (t.init_from.empty()) return "";
  const auto [from, step] = InitFromParts(t);
  return from + "@" + step;
}

std::string ResolvedSpecToml(const RunSpec& spec) {
  std::string out;
  WriteJob(spec, &out);
  WriteSlurm(spec, &out);
  WriteGateRestartHealth(spec, &out);
  if (!spec.env.empty()) {
    Section e(&out, "env");
    for (const auto& [k, v] : spec.env) e.Str(k, v);
  }
  {
    const NotifySection& n = spec.notify;
    Section w(&out, "notify");
    w.StrOrUnset("webhook", n.webhook, "\"\"  (the controller's --notify-webhook)");
    w.StrOrUnset("command", n.command, "\"\"  (the controller's --notify-command)");
    w.Strs("on", n.on);
  }
  if (spec.has_model) WriteTrainer(spec.trainer, &out);
  return out;
}

}  // namespace trellis::spec
