#include "cli/render_launches.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <set>
#include <vector>

#include "cli/format.h"
#include "common/spec/run_spec.h"

namespace trellis::cli {

namespace {

// A log line in the evidence line is cut shorter than the whole: the fields
// before it matter as much.
constexpr size_t kLogWidth = 160;

// Free text from the controller on one line, so rows and the lines under
// them stay in step.
std::string OneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string Plural(int n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string LaunchId(int attempt, int launch) {
  return std::to_string(attempt) + "." + std::to_string(launch);
}

// What followed a launch, as the THEN column reads.
std::string Then(const std::string& recovery) {
  if (recovery.empty()) return "-";
  if (recovery == "new_attempt") return "new attempt";
  return recovery;
}

std::string SignalText(int64_t sig) {
  std::string out = std::to_string(sig);
  switch (sig) {
    case SIGKILL:
      return out + " (SIGKILL)";
    case SIGBUS:
      return out + " (SIGBUS)";
    case SIGSEGV:
      return out + " (SIGSEGV)";
    case SIGABRT:
      return out + " (SIGABRT)";
    case SIGTERM:
      return out + " (SIGTERM)";
    case SIGILL:
      return out + " (SIGILL)";
    case SIGFPE:
      return out + " (SIGFPE)";
    case SIGINT:
      return out + " (SIGINT)";
    default:
      return out;
  }
}

// Any JSON value as short text: strings bare, arrays joined with ",",
// objects as "k v, k v". Never throws: the parser let only valid UTF-8 in.
// Nesting past a few levels is elided rather than followed (the stack).
std::string Text(const Json& v, int depth = 0) {
  if (depth > 4 && v.is_structured()) return "...";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v.get<double>());
    return buf;
  }
  std::string out;
  if (v.is_array()) {
    for (const auto& e : v) out += (out.empty() ? "" : ",") + Text(e, depth + 1);
    return out;
  }
  if (v.is_object()) {
    for (const auto& [k, e] : v.items())
      out += (out.empty() ? "" : ", ") + k + " " + Text(e, depth + 1);
    return out;
  }
  return v.dump();
}

const Json* Field(const Json& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::optional<int64_t> IntField(const Json& o, const char* key) {
  const Json* v = Field(o, key);
  if (v == nullptr || !v->is_number_integer()) return std::nullopt;
  return v->get<int64_t>();
}

bool TrueField(const Json& o, const char* key) {
  const Json* v = Field(o, key);
  return v != nullptr && v->is_boolean() && v->get<bool>();
}

// Non-empty text of a field, "" when absent or empty.
std::string TextField(const Json& o, const char* key) {
  const Json* v = Field(o, key);
  return v == nullptr ? "" : Text(*v);
}

// Keys the summary reads by name, or leaves out: the class and the step's
// code are in the table already.
const std::set<std::string>& KnownKeys() {
  static const std::set<std::string> keys{
      "class",         "step_exit_code",    "rank",      "node",          "exit_code",
      "signal",        "after_stop",        "markers",   "lost_nodes",    "silent_s",
      "last_step",     "before_first_step", "oom_kills", "failing_nodes", "unreported_nodes",
      "evidence_line", "log_line",          "line",      "ranks"};
  return keys;
}

std::vector<std::string> EvidenceParts(const Json& ev) {
  std::vector<std::string> parts;
  std::string node = TextField(ev, "node");
  if (auto rank = IntField(ev, "rank")) {
    parts.push_back("rank " + std::to_string(*rank) + (node.empty() ? "" : " on " + node));
  } else if (!node.empty()) {
    parts.push_back("node " + node);
  }
  if (auto code = IntField(ev, "exit_code"); code && *code != 0)
    parts.push_back("exit " + std::to_string(*code));
  if (auto sig = IntField(ev, "signal"); sig && *sig != 0)
    parts.push_back("signal " + SignalText(*sig));
  if (TrueField(ev, "after_stop")) parts.push_back("ended while its worker stopped the ranks");
  if (std::string v = TextField(ev, "markers"); !v.empty()) parts.push_back("markers " + v);
  if (std::string v = TextField(ev, "lost_nodes"); !v.empty()) parts.push_back("lost " + v);
  if (const Json* silent = Field(ev, "silent_s")) {
    // A hang's rank: seconds; lost nodes: node -> seconds.
    std::string text;
    if (silent->is_object()) {
      for (const auto& [node, s] : silent->items())
        text += (text.empty() ? "" : ", ") + node + " " + Text(s) + " s";
    } else {
      text = Text(*silent) + (silent->is_number() ? " s" : "");
    }
    parts.push_back("silent " + text);
  }
  if (TrueField(ev, "before_first_step")) {
    parts.push_back("before the first step");
  } else if (auto step = IntField(ev, "last_step"); step && *step >= 0) {
    parts.push_back("last step " + std::to_string(*step));
  }
  if (auto oom = IntField(ev, "oom_kills")) parts.push_back("oom kills " + std::to_string(*oom));
  if (const Json* failing = Field(ev, "failing_nodes"); failing && failing->size() > 1)
    parts.push_back("failing on " + Text(*failing));
  if (std::string v = TextField(ev, "unreported_nodes"); !v.empty())
    parts.push_back("no final report from " + v);
  for (const auto& [key, value] : ev.items()) {
    if (KnownKeys().count(key) || value.is_null() || (value.is_boolean() && !value.get<bool>()))
      continue;
    if (std::string v = Text(value); !v.empty()) parts.push_back(key + " " + v);
  }
  for (const char* key : {"evidence_line", "log_line", "line"}) {
    if (std::string line = TextField(ev, key); !line.empty()) {
      parts.push_back("log: " + Truncate(line, kLogWidth));
      break;
    }
  }
  return parts;
}

void AddLaunchDetail(const v1::Launch& l, std::string* out) {
  *out += "    reason    " + OrDash(OneLine(l.reason())) + "\n";
  std::string evidence = EvidenceSummary(l.evidence_json());
  if (!evidence.empty()) *out += "    evidence  " + OneLine(evidence) + "\n";
}

}  // namespace

std::optional<int> MaxRestarts(const std::string& spec_toml) {
  spec::FieldErrors errors;
  auto parsed = spec::ParseRunSpec(spec_toml, &errors);
  if (!parsed) return std::nullopt;
  return parsed->restart.max_restarts;
}

std::string RenderRestarts(const v1::Run& run) {
  const v1::RunSummary& s = run.summary();
  int budget = MaxRestarts(run.spec_toml()).value_or(0);
  if (budget <= 0 && s.restarts() <= 0) return "";
  std::string out = "restarts   " + std::to_string(s.restarts());
  if (budget > 0) out += " of " + std::to_string(budget);
  if (s.restarts() > 0) {
    out += " (" + Plural(s.relaunches(), "relaunch", "relaunches") + " in the allocation, " +
           Plural(s.restart_attempts(), "new attempt", "new attempts") + ")";
  }
  return out + "\n";
}

namespace {
// FormatDuration without a trailing zero unit: "6m", "3h12m", "2h".
std::string Span(double seconds) {
  if (!(seconds > 0)) return "0s";
  std::string out = FormatDuration(std::chrono::milliseconds(std::llround(seconds * 1000)));
  for (const char* zero : {"00s", "00m", "00h"}) {
    if (out.size() > 3 && out.compare(out.size() - 3, 3, zero) == 0) out.resize(out.size() - 3);
  }
  return out;
}
}  // namespace

std::string RenderGoodput(const v1::Run& run) {
  const v1::RunSummary& s = run.summary();
  if (!s.has_state_seconds()) return "";
  const v1::StateSeconds& t = s.state_seconds();
  char pct[32];
  std::snprintf(pct, sizeof(pct), "%.1f%%", 100 * s.goodput_ratio());
  return "goodput    " + std::string(pct) + " (running " + Span(t.running()) + ", redone " +
         Span(t.redone()) + ", restarting " + Span(t.restarting()) +
         (t.handoff() > 0 ? ", handoff " + Span(t.handoff()) : std::string()) + ", gating " +
         Span(t.gating()) + ", queued " + Span(t.queued()) + ")\n";
}

std::string RenderCheckpointInterval(const v1::Run& run) {
  const v1::HealthEvent* newest = nullptr;
  for (const auto& e : run.health_events())
    if (e.kind() == "checkpoint_interval") newest = &e;
  if (newest == nullptr) return "";
  const Json j = Json::parse(newest->detail_json(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("every_steps") || !j["every_steps"].is_number_integer())
    return "";
  const int64_t every = j["every_steps"].get<int64_t>();
  std::string out = "checkpoint every " + Plural(static_cast<int>(every), "step", "steps") + " (auto";
  if (j.contains("step") && j["step"].is_number_integer())
    out += ", chosen after step " + std::to_string(j["step"].get<int64_t>()) + " of launch " +
           LaunchId(newest->attempt(), newest->launch());
  return out + "; its checkpoint_interval event says why)\n";
}

std::string RenderLaunches(const v1::Run& run, const TextOptions& opt) {
  if (run.launches().empty()) return "";
  Table t({"ATTEMPT.LAUNCH", "NODES", "STARTED", "DURATION", "CLASS", "EXIT", "BLAMED", "THEN"});
  for (const auto& l : run.launches()) {
    bool running = l.ended_unix_ms() == 0;
    int64_t end = running ? opt.now_ms : l.ended_unix_ms();
    std::string duration =
        l.started_unix_ms() == 0
            ? "-"
            : FormatDuration(std::chrono::milliseconds(end - l.started_unix_ms()));
    t.AddRow({LaunchId(l.attempt(), l.launch()), ShortNodeList(l.nodes()),
              FormatTime(l.started_unix_ms(), opt.utc), duration,
              running ? "running" : OrDash(OneLine(l.failure_class())),
              running ? "-" : std::to_string(l.exit_code()), OrDash(OneLine(l.blamed_node())),
              Then(OneLine(l.recovery()))});
  }
  // The table's lines (a header, then a row per launch), each row followed
  // by the detail of a launch that did not succeed.
  std::string table = t.Render();
  std::string out = "\nlaunches\n";
  size_t pos = table.find('\n') + 1;
  out += table.substr(0, pos);
  for (const auto& l : run.launches()) {
    size_t next = table.find('\n', pos) + 1;
    out += table.substr(pos, next - pos);
    pos = next;
    if (l.ended_unix_ms() != 0 && l.failure_class() != "succeeded") AddLaunchDetail(l, &out);
  }
  return out;
}

std::string RenderHealthEvents(const v1::Run& run, const TextOptions& opt) {
  if (run.health_events().empty()) return "";
  Table t({"TIME", "ATTEMPT.LAUNCH", "KIND", "RANK", "NODE", "DETAIL"});
  for (const auto& e : run.health_events()) {
    t.AddRow({FormatTime(e.unix_ms(), opt.utc), LaunchId(e.attempt(), e.launch()),
              OrDash(OneLine(e.kind())), e.rank() < 0 ? "-" : std::to_string(e.rank()),
              OrDash(OneLine(e.node())), OrDash(OneLine(e.detail()))});
  }
  std::string title = "\nhealth events";
  if (run.health_events_size() >= kHealthEventsKept)
    title += " (the newest " + std::to_string(kHealthEventsKept) + ")";
  return title + "\n" + t.Render();
}

std::string ShortNodeList(const google::protobuf::RepeatedPtrField<std::string>& nodes) {
  if (nodes.empty()) return "-";
  int shown = nodes.size() <= 3 ? nodes.size() : 2;
  std::string out;
  for (int i = 0; i < shown; ++i) out += (i == 0 ? "" : ",") + nodes[i];
  if (shown < nodes.size()) out += ",+" + std::to_string(nodes.size() - shown);
  return out;
}

std::string EvidenceSummary(const std::string& evidence_json) {
  if (evidence_json.empty()) return "";
  Json ev = Json::parse(evidence_json, nullptr, /*allow_exceptions=*/false);
  if (ev.is_discarded() || !ev.is_object()) return Truncate(evidence_json, kEvidenceWidth);
  std::string out;
  for (const auto& part : EvidenceParts(ev)) out += (out.empty() ? "" : "; ") + part;
  return out;
}

}  // namespace trellis::cli
