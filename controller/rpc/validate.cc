#include "controller/rpc/validate.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include "common/failure_marker_names.h"
#include "common/spec/run_spec.h"
#include "controller/core/slurm_facts.h"
#include "controller/core/step_batch.h"

namespace trellis::controller {

namespace {

#define RETURN_IF_BAD(expr)      \
  do {                           \
    grpc::Status bad_ = (expr);  \
    if (!bad_.ok()) return bad_; \
  } while (0)

constexpr int64_t kMaxBytes = int64_t{1} << 60;  // a probe's byte counts
constexpr int kMaxRanksPerNode = 4096;           // a worker's heartbeat and exits
constexpr int kMaxProbeEntries = 1024;           // sockets, device nodes
constexpr size_t kMaxEvidenceBytes = 512;        // as the worker cuts it
constexpr size_t kMaxUserReason = 1024;
// The worker's log markers, each at most once.
const std::set<std::string>& Markers() {
  static const std::set<std::string> m(kFailureMarkerNames.begin(), kFailureMarkerNames.end());
  return m;
}

grpc::Status Bad(std::string_view field, const std::string& what) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(field) + ": " + what);
}

// What was sent, cut: messages echo a value, never all of it.
std::string Shown(const std::string& v) {
  std::string out = v.substr(0, 100);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return "'" + out + (v.size() > 100 ? "...'" : "'");
}

grpc::Status InRange(std::string_view field, int64_t v, int64_t lo, int64_t hi,
                     const std::string& note = "") {
  if (v >= lo && v <= hi) return grpc::Status::OK;
  return Bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" +
                        note + ", got " + std::to_string(v));
}

grpc::Status Length(std::string_view field, const std::string& v, size_t lo, size_t hi) {
  if (v.size() >= lo && v.size() <= hi) return grpc::Status::OK;
  std::string range = lo == 0 ? "at most " + std::to_string(hi) + " bytes"
                              : std::to_string(lo) + " to " + std::to_string(hi) + " bytes";
  return Bad(field, range + ", got " + std::to_string(v.size()));
}

bool HasControl(const std::string& v) {
  return std::any_of(v.begin(), v.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

// Free text a person wrote: stored and printed on terminals.
grpc::Status Reason(std::string_view field, const std::string& v, bool required) {
  RETURN_IF_BAD(Length(field, v, required ? 1 : 0, kMaxUserReason));
  if (HasControl(v)) return Bad(field, "must not contain control characters");
  return grpc::Status::OK;
}

grpc::Status AllOf(std::string_view field, const std::string& v, std::string_view accepted,
                   const std::string& what) {
  bool ok = std::all_of(v.begin(), v.end(),
                        [&](char c) { return accepted.find(c) != std::string_view::npos; });
  return ok ? grpc::Status::OK : Bad(field, what + ", got " + Shown(v));
}

constexpr std::string_view kDigits = "0123456789";
constexpr std::string_view kHostChars =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:";

grpc::Status NodeName(std::string_view field, const std::string& node) {
  if (IsNodeName(node)) return grpc::Status::OK;
  return Bad(field, "must match [A-Za-z0-9._-]{1,255} (a Slurm node name), got " + Shown(node));
}

grpc::Status CheckRankExit(const std::string& f, const v1::RankExit& r) {
  RETURN_IF_BAD(InRange(f + ".rank", r.rank(), 0, kMaxRankNumber - 1));
  RETURN_IF_BAD(InRange(f + ".exit_code", r.exit_code(), 0, 255));
  RETURN_IF_BAD(InRange(f + ".signal", r.signal(), 0, 127));
  if (r.markers_size() > static_cast<int>(Markers().size()))
    return Bad(f + ".markers", "at most " + std::to_string(Markers().size()) + " entries, got " +
                                   std::to_string(r.markers_size()));
  std::set<std::string> seen;
  for (int i = 0; i < r.markers_size(); ++i) {
    const std::string& m = r.markers(i);
    if (!Markers().count(m) || !seen.insert(m).second)
      return Bad(f + ".markers[" + std::to_string(i) + "]",
                 "one of device_oom, host_oom, nccl_error, nccl_timeout, device_error, network, "
                 "each at most once, got " + Shown(m));
  }
  return Length(f + ".evidence", r.evidence(), 0, kMaxEvidenceBytes);
}

grpc::Status CheckProbe(const v1::NodeProbe& p) {
  if (p.sockets_size() > kMaxProbeEntries || p.device_nodes_size() > kMaxProbeEntries)
    return Bad("probe", "at most " + std::to_string(kMaxProbeEntries) +
                            " sockets and as many device nodes, got " +
                            std::to_string(p.sockets_size()) + " and " +
                            std::to_string(p.device_nodes_size()));
  for (int i = 0; i < p.sockets_size(); ++i) {
    const v1::SocketProbe& s = p.sockets(i);
    const std::string f = "probe.sockets[" + std::to_string(i) + "].";
    RETURN_IF_BAD(InRange(f + "numa_node", s.numa_node(), 0, 65535));
    // The worker reads at most 64 KiB of the kernel's list.
    RETURN_IF_BAD(Length(f + "cpulist", s.cpulist(), 0, 65536));
    RETURN_IF_BAD(AllOf(f + "cpulist", s.cpulist(), "0123456789,-", "digits, ',' and '-' only"));
    const std::pair<const char*, int64_t> bytes[] = {
        {"total_bytes", s.total_bytes()},           {"free_bytes", s.free_bytes()},
        {"file_pages_bytes", s.file_pages_bytes()}, {"anon_pages_bytes", s.anon_pages_bytes()},
        {"slab_bytes", s.slab_bytes()},             {"kernel_stack_bytes", s.kernel_stack_bytes()},
        {"page_tables_bytes", s.page_tables_bytes()}, {"shmem_bytes", s.shmem_bytes()},
        {"hugepages_bytes", s.hugepages_bytes()}};
    for (const auto& [name, v] : bytes) RETURN_IF_BAD(InRange(f + name, v, 0, kMaxBytes));
    // (total - free) - attributed: below 0 when the kernel's counters overlap.
    RETURN_IF_BAD(InRange(f + "unattributed_bytes", s.unattributed_bytes(), -kMaxBytes, kMaxBytes));
    if (s.has_touch_obtainable_bytes())
      RETURN_IF_BAD(
          InRange(f + "touch_obtainable_bytes", s.touch_obtainable_bytes(), 0, kMaxBytes));
  }
  for (int i = 0; i < p.device_nodes_size(); ++i) {
    const v1::DeviceMemoryProbe& d = p.device_nodes(i);
    const std::string f = "probe.device_nodes[" + std::to_string(i) + "].";
    RETURN_IF_BAD(InRange(f + "numa_node", d.numa_node(), 0, 65535));
    RETURN_IF_BAD(InRange(f + "total_bytes", d.total_bytes(), 0, kMaxBytes));
    RETURN_IF_BAD(InRange(f + "free_bytes", d.free_bytes(), 0, kMaxBytes));
  }
  RETURN_IF_BAD(Length("probe.error", p.error(), 0, kMaxWorkerText));
  return InRange("probe.probed_unix_ms", p.probed_unix_ms(), 0, int64_t{1} << 53);
}

}  // namespace

grpc::Status CheckRunId(const std::string& run_id, std::string_view field) {
  bool ok = !run_id.empty() && run_id.size() <= 96 && run_id[0] != '-' &&
            std::all_of(run_id.begin(), run_id.end(), [](char c) {
              return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
            });
  if (ok) return grpc::Status::OK;
  return Bad(field, "expected 1 to 96 characters of [a-z0-9-] such as hello-1, got " +
                        Shown(run_id));
}

// --- agent API ---

grpc::Status Check(const v1::WorkerIdentity& id) {
  RETURN_IF_BAD(CheckRunId(id.run_id(), "id.run_id"));
  RETURN_IF_BAD(InRange("id.attempt", id.attempt(), 1, kMaxAttempt));
  RETURN_IF_BAD(InRange("id.launch", id.launch(), 1, kMaxAttempt));
  RETURN_IF_BAD(NodeName("id.node", id.node()));
  return Length("id.secret", id.secret(), 1, 256);
}

grpc::Status Check(const v1::RegisterRequest& req) {
  RETURN_IF_BAD(Check(req.id()));
  RETURN_IF_BAD(Length("version", req.version(), 1, 64));
  if (HasControl(req.version())) return Bad("version", "must not contain control characters");
  RETURN_IF_BAD(Length("hostname", req.hostname(), 0, 255));
  // MASTER_ADDR of every rank when this node runs rank 0.
  RETURN_IF_BAD(AllOf("hostname", req.hostname(), kHostChars,
                      "a host name or address: [A-Za-z0-9._:-]"));
  RETURN_IF_BAD(InRange("gpus", req.gpus(), 0, 1024));
  RETURN_IF_BAD(InRange("cpus", req.cpus(), 0, 1 << 20));
  RETURN_IF_BAD(CheckProbe(req.probe()));
  // They name a Slurm step on scancel's command line.
  RETURN_IF_BAD(Length("slurm_job_id", req.slurm_job_id(), 0, 20));
  RETURN_IF_BAD(AllOf("slurm_job_id", req.slurm_job_id(), kDigits, "digits only"));
  RETURN_IF_BAD(Length("slurm_step_id", req.slurm_step_id(), 0, 20));
  RETURN_IF_BAD(AllOf("slurm_step_id", req.slurm_step_id(), kDigits, "digits only"));
  // metrics_addr that is not HOST:PORT is dropped, not refused (Register).
  return Length("metrics_addr", req.metrics_addr(), 0, kMaxWorkerText);
}

grpc::Status Check(const v1::AgentReport& report) {
  RETURN_IF_BAD(Check(report.id()));
  switch (report.body_case()) {
    case v1::AgentReport::kHeartbeat:
      return InRange("heartbeat.ranks_alive", report.heartbeat().ranks_alive(), 0,
                     kMaxRanksPerNode);
    case v1::AgentReport::kRankExit:
      return CheckRankExit("rank_exit", report.rank_exit());
    default:  // a batch (CheckBatch), or a newer worker's report (ignored)
      return grpc::Status::OK;
  }
}

grpc::Status Check(const v1::ReportExitRequest& req) {
  RETURN_IF_BAD(Check(req.id()));
  if (req.ranks_size() > kMaxRanksPerNode)
    return Bad("ranks", "at most " + std::to_string(kMaxRanksPerNode) + " entries, got " +
                            std::to_string(req.ranks_size()));
  for (int i = 0; i < req.ranks_size(); ++i)
    RETURN_IF_BAD(CheckRankExit("ranks[" + std::to_string(i) + "]", req.ranks(i)));
  RETURN_IF_BAD(InRange("exit_code", req.exit_code(), 0, 255));
  RETURN_IF_BAD(Length("reason", req.reason(), 0, kMaxWorkerText));
  RETURN_IF_BAD(InRange("oom_kills", req.oom_kills(), -1, 1 << 20, " (-1: unknown)"));
  if (!req.planned_stop().empty() && req.planned_stop() != "time_limit")
    return Bad("planned_stop", "\"time_limit\" or empty, got " + Shown(req.planned_stop()));
  if (req.unstored_step_records() < 0 || req.unstored_step_records() > (int64_t{1} << 32))
    return Bad("unstored_step_records",
               "0..2^32, got " + std::to_string(req.unstored_step_records()));
  return grpc::Status::OK;
}

// Launch 0 is the question of a requeued job's batch script, which starts over.
grpc::Status Check(const v1::NextLaunchRequest& req) {
  RETURN_IF_BAD(InRange("requeue_count", req.requeue_count(), 0, 1000));
  RETURN_IF_BAD(Length("allocation_nodelist", req.allocation_nodelist(), 0, 65536));
  RETURN_IF_BAD(InRange("step_exit_code", req.step_exit_code(), 0, 255));
  if (req.requeue_count() == 0) return Check(req.id());
  if (req.id().launch() != 0) return Bad("id.launch", "must be 0 with requeue_count");
  if (req.terminated_by_slurm()) return Bad("terminated_by_slurm", "not with requeue_count");
  v1::WorkerIdentity id = req.id();
  id.set_launch(1);  // the other fields as for any identity
  return Check(id);
}

grpc::Status Check(const v1::StandByRequest& req) {
  RETURN_IF_BAD(CheckRunId(req.run_id()));
  RETURN_IF_BAD(InRange("pool", req.pool(), 1, kMaxAttempt));
  RETURN_IF_BAD(NodeName("node", req.node()));
  RETURN_IF_BAD(Length("secret", req.secret(), 1, 256));
  RETURN_IF_BAD(Length("version", req.version(), 1, 64));
  if (HasControl(req.version())) return Bad("version", "must not contain control characters");
  RETURN_IF_BAD(Length("hostname", req.hostname(), 0, 255));
  RETURN_IF_BAD(AllOf("hostname", req.hostname(), kHostChars,
                      "a host name or address: [A-Za-z0-9._:-]"));
  RETURN_IF_BAD(Length("slurm_job_id", req.slurm_job_id(), 0, 20));
  RETURN_IF_BAD(AllOf("slurm_job_id", req.slurm_job_id(), kDigits, "digits only"));
  return CheckProbe(req.probe());
}

// --- user API ---

grpc::Status Check(const v1::SubmitRunRequest& req) {
  if (req.spec_toml().size() <= spec::kMaxSpecBytes) return grpc::Status::OK;
  // Worded as the spec parser words it (the CLI shows either).
  return Bad("spec", "is " + std::to_string(req.spec_toml().size()) + " bytes; the limit is " +
                         std::to_string(spec::kMaxSpecBytes));
}

grpc::Status Check(const v1::DoctorRequest& req) {
  if (req.spec_toml().size() <= spec::kMaxSpecBytes) return grpc::Status::OK;
  return Bad("spec", "is " + std::to_string(req.spec_toml().size()) + " bytes; the limit is " +
                         std::to_string(spec::kMaxSpecBytes));
}

grpc::Status Check(const v1::GetRunRequest& req) {
  RETURN_IF_BAD(CheckRunId(req.run_id()));
  RETURN_IF_BAD(InRange("ranks_from", req.ranks_from(), 0, kMaxRankNumber));
  return InRange("ranks_limit", req.ranks_limit(), 0, kMaxRanksPage,
                 " (0: " + std::to_string(kMaxRanksPage) + ")");
}

grpc::Status Check(const v1::ListRunsRequest& req) {
  return InRange("limit", req.limit(), 0, kMaxListRuns,
                 " (0: " + std::to_string(kDefaultListRuns) + ")");
}

grpc::Status Check(const v1::CancelRunRequest& req) {
  RETURN_IF_BAD(CheckRunId(req.run_id()));
  return Reason("reason", req.reason(), /*required=*/false);
}

grpc::Status Check(const v1::WatchRunRequest& req) { return CheckRunId(req.run_id()); }

grpc::Status Check(const v1::ReadLogsRequest& req) {
  RETURN_IF_BAD(CheckRunId(req.run_id()));
  RETURN_IF_BAD(InRange("rank", req.rank(), -1, kMaxRankNumber - 1, " (-1: every rank)"));
  RETURN_IF_BAD(InRange("launch", req.launch(), 0, kMaxAttempt, " (0: the latest)"));
  RETURN_IF_BAD(InRange("tail_lines", req.tail_lines(), 0, 1 << 20, " (0: all)"));
  if (!req.node().empty()) RETURN_IF_BAD(NodeName("node", req.node()));
  return InRange("attempt", req.attempt(), 0, kMaxAttempt, " (0: the latest)");
}

grpc::Status Check(const v1::QuarantineNodeRequest& req) {
  RETURN_IF_BAD(NodeName("node", req.node()));
  return Reason("reason", req.reason(), /*required=*/true);
}

grpc::Status Check(const v1::ReleaseNodeRequest& req) { return NodeName("node", req.node()); }

grpc::Status Check(const v1::GateReportRequest& req) {
  RETURN_IF_BAD(CheckRunId(req.run_id()));
  return InRange("attempt", req.attempt(), 0, kMaxAttempt, " (0: every attempt)");
}

grpc::Status Check(const v1::RunStepsRequest& req) {
  RETURN_IF_BAD(CheckRunId(req.run_id()));
  return InRange("max_points", req.max_points(), 0, kMaxStepPoints,
                 " (0: " + std::to_string(kDefaultStepPoints) + ")");
}

#undef RETURN_IF_BAD

}  // namespace trellis::controller
