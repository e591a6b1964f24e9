#include "controller/core/failure_class.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_join.h"
#include "common/exit_codes.h"

namespace trellis::controller {
namespace {

// At most `max` bytes, not ending inside a UTF-8 sequence.
std::string Utf8Prefix(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end);
}

using nlohmann::json;

constexpr std::pair<FailureClass, std::string_view> kNames[] = {
    {FailureClass::kSucceeded, "succeeded"},
    {FailureClass::kRankExit, "rank_exit"},
    {FailureClass::kSignal, "signal"},
    {FailureClass::kDeviceOom, "device_oom"},
    {FailureClass::kHostOom, "host_oom"},
    {FailureClass::kDeviceError, "device_error"},
    {FailureClass::kNccl, "nccl"},
    {FailureClass::kNodeLost, "node_lost"},
    {FailureClass::kHang, "hang"},
    {FailureClass::kUserError, "user_error"},
    {FailureClass::kGate, "gate"},
    {FailureClass::kTimeLimit, "time_limit"},
    {FailureClass::kPreemption, "preemption"},
    {FailureClass::kCancel, "cancel"},
    {FailureClass::kTerminated, "terminated"},
    {FailureClass::kDamagedCheckpoint, "damaged_checkpoint"},
    {FailureClass::kHandoff, "handoff"},
};

constexpr size_t kMaxLogInReason = 200;
constexpr size_t kMaxLogInEvidence = 1024;  // the JSON is stored per launch

// The signal that ended a rank, 0 if none (see the header on 129..192).
int SignalOf(const RankEnd& r) {
  if (r.signal != 0) return r.signal;
  if (r.exit_code > kExitSignalBase && r.exit_code <= kExitSignalBase + 64)
    return r.exit_code - kExitSignalBase;
  return 0;
}

bool IsFailing(const RankEnd& r) { return r.exit_code != 0 || r.signal != 0; }

bool HasMarker(const RankEnd& r, std::string_view m) {
  return std::find(r.markers.begin(), r.markers.end(), m) != r.markers.end();
}

// The rank's own word that the step it resumed from is damaged: the exit
// code and the line saying so, together (74 alone is any program's EX_IOERR).
bool FoundADamagedCheckpoint(const RankEnd& r) {
  return r.exit_code == kExitDamagedCheckpoint && HasMarker(r, "damaged_checkpoint");
}

bool HasNcclMarker(const RankEnd& r) {
  return HasMarker(r, "nccl_error") || HasMarker(r, "nccl_timeout") || HasMarker(r, "network");
}

std::string SignalName(int sig) {
  switch (sig) {
    case SIGKILL:
      return " (SIGKILL)";
    case SIGBUS:
      return " (SIGBUS)";
    case SIGSEGV:
      return " (SIGSEGV)";
    case SIGABRT:
      return " (SIGABRT)";
    case SIGTERM:
      return " (SIGTERM)";
    case SIGILL:
      return " (SIGILL)";
    case SIGFPE:
      return " (SIGFPE)";
    case SIGINT:
      return " (SIGINT)";
    default:
      return "";
  }
}

std::string Seconds(double s) { return std::to_string(std::llround(s)) + " s"; }

// The step's code alone, when no rank says more.
FailureClass ClassOfCode(int code) {
  if (code == kExitDoNotRetry) return FailureClass::kUserError;
  if (code > kExitSignalBase && code <= kExitSignalBase + 64) return FailureClass::kSignal;
  return FailureClass::kRankExit;
}

LaunchVerdict Verdict(FailureClass cls, int exit_code, std::string reason, json evidence,
                      std::string blamed = "") {
  LaunchVerdict v;
  v.succeeded = cls == FailureClass::kSucceeded;
  v.cls = cls;
  v.exit_code = exit_code;
  v.reason = std::move(reason);
  v.blamed_node = std::move(blamed);
  v.retryable = !v.succeeded && cls != FailureClass::kUserError && cls != FailureClass::kCancel;
  evidence["class"] = FailureClassName(cls);
  // The log line comes from a worker: invalid UTF-8 is replaced, never thrown on.
  v.evidence_json = evidence.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return v;
}

LaunchVerdict LostVerdict(const LaunchEvidence& e, int failed_code, json ev) {
  const std::string& node = e.lost_nodes.front();
  auto silent = e.lost_silent_s.find(node);
  std::string reason = "node " + node + " lost: ";
  reason += silent != e.lost_silent_s.end() ? "worker silent for " + Seconds(silent->second)
                                            : "its worker's stream broke without a final report";
  if (e.lost_nodes.size() > 1)
    reason += "; also lost: " + absl::StrJoin(e.lost_nodes.begin() + 1, e.lost_nodes.end(), ", ");
  ev["lost_nodes"] = e.lost_nodes;
  if (!e.lost_silent_s.empty()) ev["silent_s"] = e.lost_silent_s;
  return Verdict(FailureClass::kNodeLost, failed_code, reason, std::move(ev), node);
}

LaunchVerdict HangVerdict(const HangEvidence& h, int failed_code, json ev) {
  std::string reason;
  if (h.culprit_unknown) {
    reason = "every rank hung after step " + std::to_string(h.last_step) + " (no step for " +
             Seconds(h.silent_s) + "), none of their processes stopped or stuck in the " +
             "kernel: a collective that never completed, and nothing says which rank held " +
             "it, so no node is blamed";
  } else {
    reason = "rank " + std::to_string(h.rank) + " on " + h.node + " hung: ";
    reason += h.before_first_step ? "no first step after " + Seconds(h.silent_s)
                                  : "no step for " + Seconds(h.silent_s) + " after step " +
                                        std::to_string(h.last_step);
    if (h.process_state == 'T' || h.process_state == 't')
      reason += " (its process was stopped)";
    else if (h.process_state == 'D')
      reason += " (its process was stuck in the kernel)";
  }
  ev.update({{"rank", h.rank},
             {"node", h.node},
             {"last_step", h.last_step},
             {"silent_s", h.silent_s},
             {"before_first_step", h.before_first_step},
             {"culprit_unknown", h.culprit_unknown}});
  if (h.process_state != 0) ev["process_state"] = std::string(1, h.process_state);
  return Verdict(FailureClass::kHang, failed_code, reason, std::move(ev),
                 h.culprit_unknown ? "" : h.node);
}

// What, besides a rank's SIGKILL, points at `node` (rules above): "" if nothing.
std::string SecondSignalOn(const LaunchEvidence& e, const std::string& node) {
  for (const auto& r : e.rank_ends)
    if (r.node == node && HasMarker(r, "device_error"))
      return "rank " + std::to_string(r.rank) + " on it had a device error";
  auto earlier = e.earlier_lone_kills.find(node);
  if (earlier != e.earlier_lone_kills.end())
    return "its second lone SIGKILL within " + std::to_string(kLoneKillMemory.count()) +
           " h (the first: " + earlier->second + ")";
  return "";
}

// `cause` is the deciding rank; `stopped` says every failing rank ended after_stop.
LaunchVerdict RankVerdict(const LaunchEvidence& e, const RankEnd& cause, bool stopped, json ev) {
  int sig = SignalOf(cause);
  auto oom = e.oom_kills.find(cause.node);
  bool oom_known = oom != e.oom_kills.end();
  int oom_count = oom_known ? oom->second : 0;
  std::string where = "rank " + std::to_string(cause.rank) + " on " + cause.node + " ";
  std::string how = sig != 0 && cause.exit_code != kExitDoNotRetry
                        ? "was killed by signal " + std::to_string(sig) + SignalName(sig)
                        : "exited with " + std::to_string(cause.exit_code);
  if (stopped) how += " after its worker began stopping the ranks";

  FailureClass cls;
  std::string what;
  std::string second;  // a lone SIGKILL's second signal, if any
  bool blame = false;
  if (cause.exit_code == kExitDoNotRetry) {
    cls = FailureClass::kUserError;
    what = "the program asked not to be retried";
  } else if (FoundADamagedCheckpoint(cause)) {
    cls = FailureClass::kDamagedCheckpoint;
    what = "the checkpoint it resumed from is damaged";
  } else if (HasMarker(cause, "device_oom")) {
    cls = FailureClass::kDeviceOom;
    what = "out of device memory";
  } else if (HasMarker(cause, "host_oom") || (sig == SIGKILL && oom_count > 0)) {
    cls = FailureClass::kHostOom;
    what = "out of host memory";
    if (oom_count > 0)
      what += " (" + std::to_string(oom_count) + " OOM kill" + (oom_count > 1 ? "s" : "") +
              " in the job on " + cause.node + ")";
  } else if (HasMarker(cause, "device_error")) {
    cls = FailureClass::kDeviceError;
    what = "device error";
    blame = true;
  } else if (HasNcclMarker(cause)) {
    cls = FailureClass::kNccl;
    std::set<std::string> nccl_nodes;
    for (const auto& r : e.rank_ends)
      if (IsFailing(r) && !r.after_stop && HasNcclMarker(r)) nccl_nodes.insert(r.node);
    blame = nccl_nodes.size() <= 1;
    std::vector<std::string> kinds;
    for (const auto& m : cause.markers)
      if (m == "nccl_error" || m == "nccl_timeout" || m == "network") kinds.push_back(m);
    what = "NCCL or network failure (" + absl::StrJoin(kinds, ", ") + ")";
    if (!blame) what += " on " + std::to_string(nccl_nodes.size()) + " nodes";
  } else if (sig != 0) {
    cls = FailureClass::kSignal;
    blame = sig == SIGBUS;
    if (sig == SIGKILL && oom_known && oom_count == 0) {
      second = SecondSignalOn(e, cause.node);
      blame = !second.empty();
      what = blame ? "blamed on " + cause.node + ": " + second
                   : "no OOM kill and no second signal, so " + cause.node +
                         " is not blamed (a lone kill: a user's, a site watchdog's)";
    }
  } else {
    cls = FailureClass::kRankExit;
  }
  std::string reason = where + how + (what.empty() ? "" : ": " + what);
  // With a marker the worker quotes the last line that matched one; without,
  // only the log's last line, which may say nothing about the failure.
  if (!cause.evidence_line.empty())
    reason += (cause.markers.empty() ? "; last log line: " : "; log: ") +
              Utf8Prefix(cause.evidence_line, kMaxLogInReason);

  std::vector<std::string> failing_nodes;
  for (const auto& r : e.rank_ends)
    if (IsFailing(r) && !r.after_stop &&
        std::find(failing_nodes.begin(), failing_nodes.end(), r.node) == failing_nodes.end())
      failing_nodes.push_back(r.node);
  ev.update({{"rank", cause.rank},
             {"node", cause.node},
             {"exit_code", cause.exit_code},
             {"signal", sig},
             {"after_stop", cause.after_stop},
             {"markers", cause.markers},
             {"evidence_line", Utf8Prefix(cause.evidence_line, kMaxLogInEvidence)},
             {"failing_nodes", failing_nodes}});
  if (oom_known) ev["oom_kills"] = oom_count;
  if (cls == FailureClass::kSignal && sig == SIGKILL && oom_known && oom_count == 0) {
    if (second.empty())
      ev["lone_kill"] = true;
    else
      ev["second_signal"] = second;
  }
  int code = cause.exit_code != 0 ? cause.exit_code : kExitSignalBase + sig;
  return Verdict(cls, code, reason, std::move(ev), blame && !stopped ? cause.node : "");
}

// Under a time limit or a preemption (rule 2): the first failing rank, not
// ended after_stop, whose end no stop explains (a device error, or SIGBUS).
std::optional<LaunchVerdict> NodeFaultBeforeStop(const LaunchEvidence& e, const json& ev) {
  for (const auto& r : e.rank_ends) {
    if (!IsFailing(r) || r.after_stop) continue;
    LaunchVerdict v = RankVerdict(e, r, false, ev);
    bool own = v.cls == FailureClass::kDeviceError ||
               (v.cls == FailureClass::kSignal && SignalOf(r) == SIGBUS);
    if (own && !v.blamed_node.empty()) return v;
  }
  return std::nullopt;
}

}  // namespace

std::string_view FailureClassName(FailureClass c) {
  for (const auto& [cls, name] : kNames)
    if (cls == c) return name;
  return "unknown";
}

std::optional<FailureClass> ParseFailureClass(std::string_view name) {
  for (const auto& [cls, n] : kNames)
    if (n == name) return cls;
  return std::nullopt;
}

LaunchVerdict ClassifyLaunch(const LaunchEvidence& e) {
  json ev = {{"step_exit_code", e.step_exit_code}};
  if (e.controller_restarted) ev["controller_restarted"] = true;
  // Whatever the step said, a launch that did not succeed ends non-zero.
  int failed_code = e.step_exit_code != 0 ? e.step_exit_code : kExitError;
  if (e.cancelled) return Verdict(FailureClass::kCancel, kExitCancelled, "cancelled", ev);
  if (e.handoff || e.time_limit || e.preempted) {
    // Not the program's fault: the run continues without a restart. A node
    // lost, a rank hung or a node's own fault before that is still blamed,
    // so its strike keeps it out of the continuation. A handoff's ranks get
    // the time limit's signal, and say so: the handoff is what it was.
    if (e.handoff) ev["handoff"] = true;
    LaunchVerdict v =
        e.handoff ? Verdict(FailureClass::kHandoff, failed_code,
                            "stopped for the next attempt, waiting ahead and started", ev)
                  : Verdict(e.time_limit ? FailureClass::kTimeLimit : FailureClass::kPreemption,
                            failed_code,
                            e.time_limit ? "reached the Slurm time limit" : "preempted", ev);
    std::optional<LaunchVerdict> fault;
    if (!e.lost_nodes.empty()) fault = LostVerdict(e, failed_code, ev);
    else if (e.hang) fault = HangVerdict(*e.hang, failed_code, ev);
    else fault = NodeFaultBeforeStop(e, ev);
    if (fault) {
      v.blamed_node = fault->blamed_node;
      v.reason += "; before that, " + fault->reason;
    }
    return v;
  }
  if (e.gate_aborted)
    return Verdict(FailureClass::kGate, kExitGateAbort, "the launch gate aborted", ev);
  if (!e.lost_nodes.empty()) return LostVerdict(e, failed_code, std::move(ev));
  if (e.hang) return HangVerdict(*e.hang, failed_code, std::move(ev));

  // Whenever it arrived: its peers fail at their next collective and may be
  // heard first.
  for (const auto& r : e.rank_ends)
    if (FoundADamagedCheckpoint(r)) return RankVerdict(e, r, r.after_stop, std::move(ev));

  const RankEnd* cause = nullptr;
  const RankEnd* stopped = nullptr;
  for (const auto& r : e.rank_ends) {
    if (!IsFailing(r)) continue;
    if (!r.after_stop) {
      cause = &r;
      break;
    }
    if (stopped == nullptr) stopped = &r;
  }
  if (cause != nullptr) return RankVerdict(e, *cause, false, std::move(ev));
  if (stopped != nullptr) return RankVerdict(e, *stopped, true, std::move(ev));

  if (e.step_exit_code == 0) {
    std::string reason = e.rank_ends.empty()
                             ? "srun step ended with 0"
                             : "all " + std::to_string(e.rank_ends.size()) + " ranks exited 0";
    ev["ranks"] = e.rank_ends.size();
    return Verdict(FailureClass::kSucceeded, 0, reason, std::move(ev));
  }
  std::string reason = "srun step ended with " + std::to_string(e.step_exit_code);
  std::vector<std::string> unreported;
  for (const auto& n : e.go_nodes)
    if (std::find(e.reported_nodes.begin(), e.reported_nodes.end(), n) == e.reported_nodes.end())
      unreported.push_back(n);
  if (!unreported.empty()) {
    reason += "; no final report from " + absl::StrJoin(unreported, ", ");
    ev["unreported_nodes"] = unreported;
  }
  if (e.controller_restarted) reason += " (the controller restarted during the launch)";
  return Verdict(ClassOfCode(e.step_exit_code), e.step_exit_code, reason, std::move(ev));
}

}  // namespace trellis::controller
