#include "common/spec/run_spec.h"

#include <algorithm>
#include <regex>

#include "common/spec/model_fit.h"
#include "common/spec/spec_overrides.h"
#include "common/spec/table_reader.h"

namespace trellis::spec {
namespace {

bool MatchesCharset(std::string_view s, std::string_view extra) {
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           extra.find(c) != std::string_view::npos;
  });
}

bool HasControlChars(std::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// Environment names Trellis sets itself for every rank (the rank contract).
bool IsReservedEnvName(const std::string& k) {
  static const char* kReserved[] = {"RANK",        "WORLD_SIZE",  "LOCAL_RANK",
                                    "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                    "CUDA_VISIBLE_DEVICES"};
  for (const char* r : kReserved)
    if (k == r) return true;
  return k.rfind("TRELLIS_", 0) == 0 || k.rfind("SLURM_", 0) == 0;
}

void ParseJob(const toml::table& root, RunSpec* s, FieldErrors* errors) {
  TableReader r(root["job"].as_table(), "job", errors);
  if (!r.present()) {
    errors->push_back({"job", "section is required (it holds job.name)"});
    return;
  }
  r.String("name", &s->job.name, 63, /*required=*/true);
  if (!s->job.name.empty() && !IsValidRunName(s->job.name)) {
    r.Error("name", "must match [a-z0-9-]{1,63} and start with a letter or digit, got '" +
                        s->job.name + "'");
  }
  r.Known("command");
  if (const toml::node* cmd = root["job"]["command"].node()) {
    if (auto str = cmd->value_exact<std::string>()) {
      if (str->empty() || str->size() > 4096)
        r.Error("command", "must be a non-empty string of at most 4096 characters");
      else
        s->job.command = {"/bin/sh", "-c", *str};
    } else {
      std::vector<std::string> argv;
      r.StringList("command", &argv, 256, 4096);
      if (cmd->is_array() && (argv.empty() || argv[0].empty()))
        r.Error("command", "must be a non-empty string or a non-empty array of strings");
      else if (!cmd->is_array())
        r.Error("command", "must be a string or an array of strings");
      s->job.command = std::move(argv);
    }
    // Each argument reaches execve as a C string, which a NUL would cut short.
    for (const std::string& arg : s->job.command) {
      if (arg.find('\0') == std::string::npos) continue;
      r.Error("command", "must not contain NUL characters");
      break;
    }
  }
  r.String("output_dir", &s->job.output_dir, 255);
  if (!s->job.output_dir.empty() && !IsSafeRelativePath(s->job.output_dir)) {
    r.Error("output_dir",
            "must be a relative path under the output root ([A-Za-z0-9._-] components, no '..')"
            ", got '" + s->job.output_dir + "'");
  }
  r.Finish();
}

// Accepts minutes as an integer or "[D-]HH:MM:SS".
void ParseTimeLimit(TableReader& r, const toml::table* slurm, SlurmSection* out) {
  r.Known("time_limit");
  if (slurm == nullptr || !slurm->contains("time_limit")) return;
  const toml::node& n = *slurm->get("time_limit");
  const char* accepted = "must be minutes (an integer in [1, 525600]) or \"[D-]HH:MM:SS\"";
  if (auto m = n.value_exact<int64_t>()) {
    if (*m < 1 || *m > 525600) return r.Error("time_limit", accepted);
    out->time_limit_minutes = *m;
    return;
  }
  auto s = n.value_exact<std::string>();
  static const std::regex re(R"(^(?:(\d{1,3})-)?(\d{1,2}):(\d{2}):(\d{2})$)");
  std::smatch m;
  if (!s || !std::regex_match(*s, m, re)) return r.Error("time_limit", accepted);
  int64_t days = m[1].matched ? std::stoll(m[1]) : 0;
  int64_t minutes = days * 1440 + std::stoll(m[2]) * 60 + std::stoll(m[3]) +
                    (std::stoll(m[4]) > 0 ? 1 : 0);
  if (minutes < 1 || minutes > 525600 || std::stoll(m[3]) > 59 || std::stoll(m[4]) > 59)
    return r.Error("time_limit", accepted);
  out->time_limit_minutes = minutes;
}

// Seconds in [kMinContinuationLeadS, kMaxContinuationLeadS] or "auto", and at
// most half of a time limit the spec gives: a continuation eligible earlier
// would take over from an attempt that has barely started.
void ParseContinuationLead(TableReader& r, const toml::table* restart, RunSpec* s) {
  r.Known("continuation_lead_s");
  if (restart == nullptr || !restart->contains("continuation_lead_s")) return;
  const toml::node& n = *restart->get("continuation_lead_s");
  const std::string accepted = "must be \"auto\" or seconds in [" +
                               std::to_string(kMinContinuationLeadS) + ", " +
                               std::to_string(kMaxContinuationLeadS) + "]";
  if (auto text = n.value_exact<std::string>()) {
    if (*text != "auto") r.Error("continuation_lead_s", accepted + ", got \"" + *text + "\"");
    return;
  }
  auto v = n.value_exact<int64_t>();
  if (!v || *v < kMinContinuationLeadS || *v > kMaxContinuationLeadS)
    return r.Error("continuation_lead_s", accepted);
  const int64_t limit_s = int64_t{s->slurm.time_limit_minutes} * 60;
  if (limit_s > 0 && *v > limit_s / 2)
    return r.Error("continuation_lead_s",
                   "must be at most half of slurm.time_limit (" + std::to_string(limit_s / 2) +
                       " s), got " + std::to_string(*v));
  s->restart.continuation_lead_s = static_cast<int>(*v);
}

void ParseSlurm(const toml::table& root, RunSpec* s, FieldErrors* errors) {
  const toml::table* t = root["slurm"].as_table();
  TableReader r(t, "slurm", errors);
  SlurmSection& sl = s->slurm;
  r.String("partition", &sl.partition, 64);
  r.String("account", &sl.account, 64);
  if (!MatchesCharset(sl.partition, "_.-")) r.Error("partition", "must match [A-Za-z0-9_.-]");
  if (!MatchesCharset(sl.account, "_.-")) r.Error("account", "must match [A-Za-z0-9_.-]");
  r.Int("nodes", &sl.nodes, 1, kMaxNodes);
  r.Int("ranks_per_node", &sl.ranks_per_node, 1, 64);
  r.Int("gpus_per_node", &sl.gpus_per_node, 0, 64);
  r.Int("spare_nodes", &sl.spare_nodes, 0, 256);
  r.Int("signal_grace_s", &sl.signal_grace_s, 10, 3600);
  ParseTimeLimit(r, t, &sl);
  r.String("nodelist", &sl.nodelist, 4096);
  if (!MatchesCharset(sl.nodelist, "_.,[]-"))
    r.Error("nodelist", "must be a Slurm hostlist ([A-Za-z0-9_.,[]-]), got '" + sl.nodelist + "'");
  r.StringList("extra_args", &sl.extra_args, 32, 256);
  for (size_t i = 0; i < sl.extra_args.size(); ++i) {
    const std::string& a = sl.extra_args[i];
    std::string opt = a.substr(0, a.find('='));
    const auto& allowed = AllowedSbatchOptions();
    if (HasControlChars(a) || std::find(allowed.begin(), allowed.end(), opt) == allowed.end()) {
      std::string list;
      for (const auto& o : allowed) list += (list.empty() ? "" : ", ") + o;
      r.Error("extra_args", "entry " + std::to_string(i) + " '" + a +
                                "' is not an allowed sbatch option (write --opt=value); accepted: " +
                                list);
    }
  }
  if (sl.gpus_per_node > 0 && sl.ranks_per_node > sl.gpus_per_node)
    r.Error("ranks_per_node", "must be <= slurm.gpus_per_node (one rank per GPU)");
  r.Finish();
}

void ParseGateAndRestart(const toml::table& root, RunSpec* s, FieldErrors* errors) {
  TableReader g(root["gate"].as_table(), "gate", errors);
  g.Double("min_free_gib_per_socket", &s->gate.min_free_gib_per_socket, 0, 100000);
  g.Double("max_unattributed_gib_per_socket", &s->gate.max_unattributed_gib_per_socket, 0,
           100000);
  g.Int("timeout_s", &s->gate.timeout_s, 1, 86400);
  g.Bool("touch_probe", &s->gate.touch_probe);
  g.Finish();
  TableReader r(root["restart"].as_table(), "restart", errors);
  r.Int("max_restarts", &s->restart.max_restarts, 0, 1000);
  r.Int("backoff_s", &s->restart.backoff_s, 0, 86400);
  r.Int("backoff_reset_s", &s->restart.backoff_reset_s, 0, 7 * 86400);
  r.Int("hang_timeout_s", &s->restart.hang_timeout_s, 10, 7 * 86400);
  r.Int("heartbeat_timeout_s", &s->restart.heartbeat_timeout_s, 5, 3600);
  r.Int("startup_timeout_s", &s->restart.startup_timeout_s, 10, 7 * 86400);
  r.Bool("relaunch_in_allocation", &s->restart.relaunch_in_allocation);
  r.String("continuation", &s->restart.continuation, 16);
  if (s->restart.continuation != "ahead" && s->restart.continuation != "after")
    r.Error("continuation", "must be \"ahead\" or \"after\", got \"" +
                                s->restart.continuation + "\"");
  ParseContinuationLead(r, root["restart"].as_table(), s);
  r.Int("spare_pool_nodes", &s->restart.spare_pool_nodes, 0, kMaxSparePoolNodes);
  r.Bool("retry_oom", &s->restart.retry_oom);
  r.Bool("hang_learned", &s->restart.hang_learned);
  r.Double("hang_floor_s", &s->restart.hang_floor_s, 1, 86400);
  r.Double("hang_factor", &s->restart.hang_factor, 2, 1000);
  r.Double("startup_floor_s", &s->restart.startup_floor_s, 5, 86400);
  r.Double("startup_factor", &s->restart.startup_factor, 1, 100);
  if (s->restart.spare_pool_nodes > 0 && !s->restart.relaunch_in_allocation)
    r.Error("spare_pool_nodes",
            "needs restart.relaunch_in_allocation = true (the pool's nodes join relaunches), "
            "got " + std::to_string(s->restart.spare_pool_nodes));
  r.Finish();
}

void ParseHealth(const toml::table& root, RunSpec* s, FieldErrors* errors) {
  TableReader h(root["health"].as_table(), "health", errors);
  HealthSection& hs = s->health;
  h.Int("straggler_window", &hs.straggler_window, 3, 1000);
  // The default M fits any window: a window smaller than 10 gets M = K.
  hs.straggler_min_slow = std::min(hs.straggler_min_slow, hs.straggler_window);
  size_t before = errors->size();
  h.Int("straggler_min_slow", &hs.straggler_min_slow, 1, hs.straggler_window);
  if (errors->size() != before) errors->back().message += " (at most health.straggler_window)";
  h.Double("straggler_factor", &hs.straggler_factor, 1.05, 100);
  h.Bool("straggler_strike", &hs.straggler_strike);
  h.Finish();
}

void ParseNotify(const toml::table& root, RunSpec* s, FieldErrors* errors) {
  TableReader r(root["notify"].as_table(), "notify", errors);
  NotifySection& n = s->notify;
  r.String("webhook", &n.webhook, 2048);
  if (!n.webhook.empty() && n.webhook.rfind("http://", 0) != 0 &&
      n.webhook.rfind("https://", 0) != 0)
    r.Error("webhook", "must be an http:// or https:// URL, got '" + n.webhook + "'");
  if (HasControlChars(n.webhook)) r.Error("webhook", "must not contain control characters");
  r.String("command", &n.command, 4096);
  if (n.command.find('\0') != std::string::npos)
    r.Error("command", "must not contain NUL characters");
  const size_t before = errors->size();
  r.StringList("on", &n.on, 8, 16);
  if (errors->size() == before)
    for (const std::string& e : n.on)
      if (std::find(NotifyEvents().begin(), NotifyEvents().end(), e) == NotifyEvents().end()) {
        r.Error("on", "'" + e + "' is not an event; accepted: end, failure, restart, handoff");
        break;
      }
  r.Finish();
}

void ParseEnv(const toml::table& root, RunSpec* s, FieldErrors* errors) {
  TableReader top(&root, "", errors);
  top.StringMap("env", &s->env, 256, 4096);
  static const std::regex name_re("^[A-Z_][A-Z0-9_]{0,127}$");
  for (const auto& [k, v] : s->env) {
    if (!std::regex_match(k, name_re))
      errors->push_back({"env." + k, "name must match [A-Z_][A-Z0-9_]*"});
    else if (IsReservedEnvName(k))
      errors->push_back({"env." + k, "is set by Trellis for every rank and cannot be overridden"});
    if (v.find('\0') != std::string::npos)
      errors->push_back({"env." + k, "value must not contain NUL"});
  }
}

}  // namespace

bool IsValidRunName(std::string_view name) {
  return !name.empty() && name.size() <= 63 && name[0] != '-' &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
         });
}

bool IsSafeRelativePath(std::string_view path) {
  if (path.empty() || path.front() == '/' || !MatchesCharset(path, "._-/")) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

const std::vector<std::string>& NotifyEvents() {
  static const std::vector<std::string> kEvents = {"end", "failure", "restart", "handoff"};
  return kEvents;
}

const std::vector<std::string>& AllowedSbatchOptions() {
  static const std::vector<std::string> kAllowed = {
      "--qos",      "--reservation", "--constraint", "--mem",        "--mem-per-cpu",
      "--cpus-per-task", "--exclusive", "--comment",  "--mail-type",  "--mail-user",
      "--gres",     "--licenses",    "--hint",       "--switches",   "--wckey",
      "--begin",    "--deadline",    "--nice",       "--requeue",    "--no-requeue"};
  return kAllowed;
}

std::optional<RunSpec> ParseRunSpec(std::string_view text, FieldErrors* errors) {
  if (text.size() > kMaxSpecBytes) {
    errors->push_back({"spec", "is " + std::to_string(text.size()) + " bytes; the limit is " +
                                   std::to_string(kMaxSpecBytes)});
    return std::nullopt;
  }
  std::optional<toml::table> parsed = ParseSpecToml(text, errors);
  if (!parsed) return std::nullopt;
  const toml::table& root = *parsed;
  RunSpec s;
  size_t before = errors->size();
  ParseJob(root, &s, errors);
  ParseSlurm(root, &s, errors);
  ParseGateAndRestart(root, &s, errors);
  ParseHealth(root, &s, errors);
  ParseEnv(root, &s, errors);
  ParseNotify(root, &s, errors);
  s.trainer = ParseTrainerSections(root, errors);
  s.has_model = root.contains("model");

  bool has_command = root["job"].as_table() && root["job"].as_table()->contains("command");
  if (has_command == s.has_model) {
    errors->push_back({"job.command", std::string("a spec needs exactly one of [job].command "
                                                  "(generic mode) or a [model] section; it has ") +
                                          (has_command ? "both" : "neither")});
  }
  if (s.has_model && errors->size() == before)
    CheckModelFitsWorld(s.trainer, s.slurm.nodes, s.slurm.ranks_per_node, errors);
  if (!s.has_model) {
    for (const char* section : {"parallel", "training", "checkpoint"})
      if (root.contains(section))
        errors->push_back({section, "applies only to [model] runs"});
  }
  static const char* kSections[] = {"job",   "slurm",    "gate",     "restart",
                                    "health", "env",     "model",    "parallel",
                                    "training", "checkpoint", "notify"};
  for (const auto& [k, v] : root) {
    bool known = false;
    for (const char* sec : kSections) known = known || k.str() == sec;
    if (!known) {
      const std::string near = NearestWord(
          k.str(), std::vector<std::string>(std::begin(kSections), std::end(kSections)));
      errors->push_back({std::string(k.str()),
                         "unknown section" + (near.empty() ? "" : " (did you mean " + near + "?)") +
                             "; the sections are job, slurm, gate, restart, health, env, "
                             "model, parallel, training, checkpoint, notify"});
    }
  }
  if (errors->size() != before) return std::nullopt;
  return s;
}

}  // namespace trellis::spec
