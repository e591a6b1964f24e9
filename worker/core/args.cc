#include "worker/core/args.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"

namespace trellis::worker {
namespace {

absl::Status Positive(const char* flag, Seconds value) {
  if (!(value.count() > 0))
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " must be a positive number of seconds, got ", value.count()));
  return absl::OkStatus();
}

absl::Status TouchProbeFlags(double gib, Seconds budget) {
  if (!(gib > 0 && gib <= kMaxTouchProbeGib))
    return absl::InvalidArgumentError(
        absl::StrCat("--touch-probe-gib must be in (0, ", kMaxTouchProbeGib, "], got ", gib));
  if (!(budget.count() > 0 && budget <= kMaxTouchProbeBudget))
    return absl::InvalidArgumentError(absl::StrCat("--touch-probe-seconds must be in (0, ",
                                                   kMaxTouchProbeBudget.count(), "], got ",
                                                   budget.count()));
  return absl::OkStatus();
}

}  // namespace

bool IsValidControllerAddress(std::string_view address) { return IsHostPort(address, 1); }

bool IsValidListenAddress(std::string_view address) { return IsHostPort(address, 0); }

std::string AdvertisedMetricsAddress(std::string_view listen, std::string_view hostname, int port) {
  std::string_view host = listen.substr(0, listen.rfind(':'));
  if (host == "0.0.0.0" || host == "[::]") host = hostname;
  return std::string(host) + ":" + std::to_string(port);
}

absl::Status ValidateControllerFile(const std::string& path) {
  if (path.empty() || path.front() == '/') return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--controller-file must be an absolute path, got '", path, "'"));
}

bool IsSafeName(std::string_view name) {
  if (name.empty() || name.size() > 128 || name[0] == '-' || name[0] == '.') return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'))
      return false;
  return true;
}

// The flags every subcommand has: where the controller is, which run.
absl::Status ControllerAndRun(const std::string& controller, const std::string& run_id) {
  if (!IsValidControllerAddress(controller))
    return absl::InvalidArgumentError(absl::StrCat(
        "--controller must be HOST:PORT with a port in [1, 65535], got '", controller, "'"));
  if (!IsSafeName(run_id))
    return absl::InvalidArgumentError(
        absl::StrCat("--run must be 1-128 characters of [A-Za-z0-9._-], got '", run_id, "'"));
  return absl::OkStatus();
}

absl::Status NodeFlag(const std::string& node) {
  if (!IsSafeName(node))
    return absl::InvalidArgumentError(
        absl::StrCat("--node must be 1-128 characters of [A-Za-z0-9._-], got '", node, "'"));
  return absl::OkStatus();
}

absl::Status ValidateIdentityArgs(const IdentityArgs& a) {
  if (absl::Status st = ControllerAndRun(a.controller, a.run_id); !st.ok()) return st;
  if (a.attempt < 1)
    return absl::InvalidArgumentError(absl::StrCat("--attempt must be >= 1, got ", a.attempt));
  if (a.launch < 1)
    return absl::InvalidArgumentError(absl::StrCat("--launch must be >= 1, got ", a.launch));
  if (absl::Status st = NodeFlag(a.node); !st.ok()) return st;
  if (a.secret_file.empty()) return absl::InvalidArgumentError("--secret-file is required");
  return ValidateControllerFile(a.controller_file);
}

absl::Status ValidateStandbyArgs(const StandbyArgs& a) {
  if (absl::Status st = ControllerAndRun(a.controller, a.run_id); !st.ok()) return st;
  if (a.pool < 1 || a.pool > 1000000)
    return absl::InvalidArgumentError(absl::StrCat("--pool must be in [1, 1000000], got ", a.pool));
  if (absl::Status st = NodeFlag(a.node); !st.ok()) return st;
  if (a.secret_file.empty()) return absl::InvalidArgumentError("--secret-file is required");
  if (a.run_dir.empty()) return absl::InvalidArgumentError("--run-dir is required");
  if (absl::Status st = TouchProbeFlags(a.touch_probe_gib, a.touch_probe_budget); !st.ok())
    return st;
  if (absl::Status st = ValidateControllerFile(a.controller_file); !st.ok()) return st;
  return Positive("--call-timeout", a.call_timeout);
}

absl::Status ValidateAgentArgs(const AgentArgs& a) {
  if (absl::Status st = ValidateIdentityArgs(a.id); !st.ok()) return st;
  if (a.run_dir.empty()) return absl::InvalidArgumentError("--run-dir is required");
  if (absl::Status st = Positive("--heartbeat-interval", a.heartbeat_interval); !st.ok()) return st;
  if (absl::Status st = Positive("--kill-grace", a.kill_grace); !st.ok()) return st;
  if (absl::Status st = Positive("--register-retry", a.register_retry); !st.ok()) return st;
  if (absl::Status st = Positive("--stream-flush", a.stream_flush); !st.ok()) return st;
  if (a.gate_wait) {
    if (absl::Status st = Positive("--gate-wait", *a.gate_wait); !st.ok()) return st;
  }
  if (a.max_queued_reports < 16)
    return absl::InvalidArgumentError(
        absl::StrCat("--max-queued-reports must be >= 16, got ", a.max_queued_reports));
  if (absl::Status st = TouchProbeFlags(a.touch_probe_gib, a.touch_probe_budget); !st.ok())
    return st;
  if (a.metrics_listen != kMetricsOff && !IsValidListenAddress(a.metrics_listen))
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-listen must be HOST:PORT with a port in [0, 65535] (0: any free port) or '",
        kMetricsOff, "', got '", a.metrics_listen, "'"));
  return absl::OkStatus();
}

absl::Status ValidateNextLaunchArgs(const NextLaunchArgs& a) {
  if (a.requeue_count < 0 || a.requeue_count > 1000)
    return absl::InvalidArgumentError(
        absl::StrCat("--requeued must be in [0, 1000], got ", a.requeue_count));
  IdentityArgs id = a.id;
  if (a.requeue_count > 0) {
    // A requeued job's batch script starts over: it has run no launch yet.
    if (a.id.launch != 0)
      return absl::InvalidArgumentError(
          absl::StrCat("--launch must be 0 with --requeued, got ", a.id.launch));
    if (a.terminated_by_slurm)
      return absl::InvalidArgumentError("--terminated-by-slurm and --requeued exclude each other");
    id.launch = 1;
  } else if (!a.allocation_nodelist.empty()) {
    return absl::InvalidArgumentError("--allocation is only for --requeued");
  }
  bool hostlist = a.allocation_nodelist.size() <= 65536 &&
                  std::all_of(a.allocation_nodelist.begin(), a.allocation_nodelist.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                           c == '-' || c == ',' || c == '[' || c == ']';
                  });
  if (!hostlist)
    return absl::InvalidArgumentError(
        "--allocation must be a Slurm hostlist (e.g. node[1-4],gpu7) of at most 65536 "
        "characters of [A-Za-z0-9._,[]-]");
  if (absl::Status st = ValidateIdentityArgs(id); !st.ok()) return st;
  if (a.step_exit_code < 0 || a.step_exit_code > 255)
    return absl::InvalidArgumentError(
        absl::StrCat("--step-exit-code must be in [0, 255], got ", a.step_exit_code));
  return Positive("--timeout", a.timeout);
}

absl::Status ValidateCheckArgs(const CheckArgs& a) {
  if (!a.controller.empty() && !IsValidControllerAddress(a.controller))
    return absl::InvalidArgumentError(absl::StrCat(
        "--controller must be HOST:PORT with a port in [1, 65535], got '", a.controller, "'"));
  if (absl::Status st = ValidateControllerFile(a.controller_file); !st.ok()) return st;
  for (const std::string& path : a.paths)
    if (path.empty() || path.front() != '/')
      return absl::InvalidArgumentError(
          absl::StrCat("--path must be an absolute path, got '", path, "'"));
  if (a.expect_gpus < 0 || a.expect_gpus > kMaxExpectedGpus)
    return absl::InvalidArgumentError(absl::StrCat("--expect-gpus must be in [0, ",
                                                   kMaxExpectedGpus, "], got ", a.expect_gpus));
  if (!(a.touch_gib >= 0 && a.touch_gib <= 1024))
    return absl::InvalidArgumentError(
        absl::StrCat("--touch-gib must be in [0, 1024] (GiB per NUMA node), got ", a.touch_gib));
  return absl::OkStatus();
}

std::string TrimSecret(std::string_view content) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!content.empty() && space(content.front())) content.remove_prefix(1);
  while (!content.empty() && space(content.back())) content.remove_suffix(1);
  return std::string(content);
}

}  // namespace trellis::worker
