// The run-spec parser (common/spec): TOML text a user submits, parsed by the
// controller at submit and again from the stored text by the scheduler, the
// worker and the CLI. Every accepted spec must be within the documented bounds
// and parse the same way twice; a pinned nodelist must expand in bounded time
// and space, as the scheduler expands it.

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>

#include "common/spec/run_spec.h"
#include "controller/slurm/parsers.h"
#include "fuzz/check.h"

namespace trellis::fuzz {
namespace {

using spec::RunSpec;

// Every field, in a fixed order: two specs are the same when these are equal.
std::string Describe(const RunSpec& s) {
  std::ostringstream o;
  o.precision(17);
  const auto& t = s.trainer;
  o << s.job.name << '|' << s.job.output_dir << '|' << s.job.command.size();
  for (const auto& a : s.job.command) o << '|' << a.size() << ':' << a;
  o << "|S" << s.slurm.partition << '|' << s.slurm.account << '|' << s.slurm.nodes << '|'
    << s.slurm.ranks_per_node << '|' << s.slurm.gpus_per_node << '|' << s.slurm.spare_nodes << '|'
    << s.slurm.time_limit_minutes << '|' << s.slurm.nodelist << '|' << s.slurm.signal_grace_s;
  for (const auto& a : s.slurm.extra_args) o << '|' << a.size() << ':' << a;
  o << "|G" << s.gate.min_free_gib_per_socket << '|' << s.gate.max_unattributed_gib_per_socket
    << '|' << s.gate.timeout_s << '|' << s.gate.touch_probe;
  o << "|R" << s.restart.max_restarts << '|' << s.restart.backoff_s << '|'
    << s.restart.backoff_reset_s << '|' << s.restart.hang_timeout_s << '|'
    << s.restart.heartbeat_timeout_s << '|' << s.restart.startup_timeout_s << '|'
    << s.restart.relaunch_in_allocation;
  o << "|H" << s.health.straggler_window << '|' << s.health.straggler_min_slow << '|'
    << s.health.straggler_factor << '|' << s.health.straggler_strike;
  for (const auto& [k, v] : s.env) o << "|E" << k << '=' << v.size() << ':' << v;
  o << "|M" << s.has_model << '|' << t.model.layers << '|' << t.model.hidden << '|'
    << t.model.heads << '|' << t.model.kv_heads << '|' << t.model.experts << '|'
    << t.model.experts_per_token << '|' << t.model.expert_hidden << '|' << t.model.vocab << '|'
    << t.model.shared_expert << '|' << t.model.rope_theta << '|' << t.model.norm_eps << '|'
    << t.model.init_std;
  o << "|P" << t.parallel.node_size << '|' << t.parallel.ep << '|'
    << t.parallel.grad_reduce_dtype << '|' << t.parallel.activation_checkpointing << '|'
    << t.parallel.expert_gather_dtype;
  const auto& tr = t.training;
  o << "|T" << tr.seq_len << '|' << tr.global_batch << '|' << tr.steps << '|' << tr.lr << '|'
    << tr.seed << '|' << tr.data << '|' << tr.warmup_steps << '|' << tr.min_lr_ratio << '|'
    << tr.weight_decay << '|' << tr.grad_clip << '|' << tr.adam_beta1 << '|' << tr.adam_beta2
    << '|' << tr.adam_eps << '|' << tr.muon_lr << '|' << tr.muon_momentum << '|'
    << tr.muon_ns_steps << '|' << tr.muon_ns_dtype << '|' << tr.aux_loss_coef << '|'
    << tr.router_bias_rate << '|' << tr.dtype << '|' << tr.device;
  o << "|C" << t.checkpoint.every_steps << '|' << t.checkpoint.keep << '|'
    << t.checkpoint.at_end << '|' << t.checkpoint.async;
  return o.str();
}

bool InRange(double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; }

bool AllowedExtraArg(const std::string& a) {
  const auto& allowed = spec::AllowedSbatchOptions();
  const std::string opt = a.substr(0, a.find('='));
  return std::find(allowed.begin(), allowed.end(), opt) != allowed.end() &&
         std::none_of(a.begin(), a.end(), [](char c) {
           return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
         });
}

bool IsEnvName(const std::string& k) {
  if (k.empty() || k.size() > 128 || (k[0] >= '0' && k[0] <= '9')) return false;
  return std::all_of(k.begin(), k.end(),
                     [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                                         c == '_'; });
}

// What README.md promises of an accepted spec.
void CheckAccepted(const RunSpec& s) {
  FUZZ_CHECK(spec::IsValidRunName(s.job.name));
  FUZZ_CHECK(s.has_model == s.job.command.empty());
  // Each argv entry reaches exec as a C string: a NUL would cut it short.
  for (const auto& a : s.job.command) FUZZ_CHECK(a.find('\0') == std::string::npos);
  if (!s.has_model) FUZZ_CHECK(!s.job.command[0].empty());
  FUZZ_CHECK(s.job.output_dir.empty() || spec::IsSafeRelativePath(s.job.output_dir));
  FUZZ_CHECK(s.slurm.nodes >= 1 && s.slurm.nodes <= spec::kMaxNodes);
  FUZZ_CHECK(s.slurm.ranks_per_node >= 1 && s.slurm.ranks_per_node <= 64);
  FUZZ_CHECK(s.slurm.gpus_per_node >= 0 && s.slurm.gpus_per_node <= 64);
  FUZZ_CHECK(s.slurm.gpus_per_node == 0 || s.slurm.ranks_per_node <= s.slurm.gpus_per_node);
  FUZZ_CHECK(s.slurm.spare_nodes >= 0 && s.slurm.spare_nodes <= 256);
  FUZZ_CHECK(s.slurm.signal_grace_s >= 10 && s.slurm.signal_grace_s <= 3600);
  FUZZ_CHECK(s.slurm.time_limit_minutes >= 0 && s.slurm.time_limit_minutes <= 525600);
  // The scheduler expands a pinned nodelist on the controller's loop thread.
  if (auto names = controller::ExpandHostlist(s.slurm.nodelist); names.ok())
    FUZZ_CHECK(names->size() <= 100000);
  FUZZ_CHECK(s.slurm.extra_args.size() <= 32);
  for (const auto& a : s.slurm.extra_args) FUZZ_CHECK(AllowedExtraArg(a));
  FUZZ_CHECK(InRange(s.gate.min_free_gib_per_socket, 0, 100000));
  FUZZ_CHECK(InRange(s.gate.max_unattributed_gib_per_socket, 0, 100000));
  FUZZ_CHECK(s.gate.timeout_s >= 1 && s.gate.timeout_s <= 86400);
  FUZZ_CHECK(s.restart.max_restarts >= 0 && s.restart.max_restarts <= 1000);
  FUZZ_CHECK(s.restart.hang_timeout_s >= 10 && s.restart.heartbeat_timeout_s >= 5 &&
             s.restart.startup_timeout_s >= 10);
  FUZZ_CHECK(s.health.straggler_window >= 3 && s.health.straggler_window <= 1000);
  FUZZ_CHECK(s.health.straggler_min_slow >= 1 &&
             s.health.straggler_min_slow <= s.health.straggler_window);
  FUZZ_CHECK(InRange(s.health.straggler_factor, 1.05, 100));
  FUZZ_CHECK(s.env.size() <= 256);
  for (const auto& [k, v] : s.env) {
    FUZZ_CHECK(IsEnvName(k));
    FUZZ_CHECK(k.rfind("TRELLIS_", 0) != 0 && k.rfind("SLURM_", 0) != 0 && k != "RANK");
    FUZZ_CHECK(v.find('\0') == std::string::npos);
  }
}

}  // namespace

void FuzzRunSpec(const uint8_t* data, size_t size) {
  const std::string_view text = AsText(data, size);
  spec::FieldErrors errors;
  std::optional<RunSpec> s = spec::ParseRunSpec(text, &errors);
  FUZZ_CHECK(s.has_value() == errors.empty());
  for (const auto& e : errors) FUZZ_CHECK(!e.message.empty());
  if (!s) return;
  CheckAccepted(*s);
  const std::string described = Describe(*s);

  spec::FieldErrors again_errors;
  std::optional<RunSpec> again = spec::ParseRunSpec(text, &again_errors);
  FUZZ_CHECK(again.has_value() && Describe(*again) == described);
}

}  // namespace trellis::fuzz
