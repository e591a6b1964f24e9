#include "cli/format_nodes.h"

#include <cstdio>
#include <sstream>

namespace trellis::cli {

std::string GiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

std::string RenderNodes(const v1::ListNodesResponse& nodes, int64_t now_ms, bool utc) {
  if (nodes.nodes_size() == 0) return "no node has been quarantined\n";
  Table t({"NODE", "STATE", "STRIKES", "SINCE", "UNTIL", "BY", "LAST CHECK", "REASON"});
  for (const auto& n : nodes.nodes()) {
    std::string until = n.expiry_unix_ms() == 0 ? "released by hand"
                                                : FormatTime(n.expiry_unix_ms(), utc);
    t.AddRow({n.name(), n.state(), std::to_string(n.strikes()),
              FormatAge(now_ms, n.since_unix_ms()) + " ago", until, n.actor(),
              RenderLastCheck(n, now_ms), Truncate(n.reason(), 100)});
  }
  return t.Render();
}

std::string RenderLastCheck(const v1::NodeStatus& n, int64_t now_ms) {
  if (n.check_started_unix_ms() == 0) return "-";
  const std::string job = n.check_job_id().empty() ? "" : " (job " + n.check_job_id() + ")";
  if (n.check_ended_unix_ms() == 0)
    return "running" + job + ", " + FormatAge(now_ms, n.check_started_unix_ms()) + " so far";
  return std::string(n.check_passed() ? "passed" : "FAILED") + " " +
         FormatAge(now_ms, n.check_ended_unix_ms()) + " ago" + job + ": " +
         Truncate(n.check_summary(), 80);
}

std::string RenderGatePolicy(const std::string& policy_json) {
  Json policy = Json::parse(policy_json, nullptr, false);
  if (!policy.is_object()) return "";
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "policy: free >= %.1f GiB and unattributed <= %.1f GiB per socket, "
                "registration within %d s, touch probe %s\n",
                policy.value("min_free_gib_per_socket", 0.0),
                policy.value("max_unattributed_gib_per_socket", 0.0), policy.value("timeout_s", 0),
                policy.value("touch_probe", false) ? "on" : "off");
  std::string out = buf;
  // Records from before the ranks' host memory was counted lack the keys.
  if (const double rank_gib = policy.value("rank_host_gib", 0.0); rank_gib > 0) {
    std::snprintf(buf, sizeof(buf),
                  "        ranks' host memory: %.1f GiB per rank bound to a socket (%d ranks per "
                  "node; ",
                  rank_gib, policy.value("ranks_per_node", 1));
    out += buf + policy.value("rank_host_what", std::string()) +
           "); nodes with less free than that on top go last\n";
  }
  return out;
}

std::string RenderGateReport(const v1::GateReportResponse& report, bool utc) {
  std::ostringstream out;
  out << "gate report for run " << report.run_id() << "\n";
  if (report.gates_size() == 0) out << "  (no gate has decided yet)\n";
  for (const auto& g : report.gates()) {
    out << "\nattempt " << g.attempt() << " launch " << g.launch() << ": " << g.decision()
        << " at " << FormatTime(g.unix_ms(), utc) << ": " << g.reason() << "\n";
    out << RenderGatePolicy(g.policy_json());
    Table t({"NODE", "DECISION", "SOCKET", "TOTAL", "FREE", "UNATTRIBUTED", "TOUCHED", "REASONS"});
    for (const auto& n : g.nodes()) {
      std::string reasons;
      for (const auto& r : n.reasons()) reasons += (reasons.empty() ? "" : "; ") + r;
      if (!n.probe().error().empty() && reasons.empty()) reasons = n.probe().error();
      if (n.probe().sockets_size() == 0) {
        t.AddRow({n.node(), n.decision(), "-", "-", "-", "-", "-", reasons});
        continue;
      }
      bool first = true;
      for (const auto& s : n.probe().sockets()) {
        t.AddRow({first ? n.node() : "", first ? n.decision() : "", std::to_string(s.numa_node()),
                  GiB(s.total_bytes()), GiB(s.free_bytes()), GiB(s.unattributed_bytes()),
                  s.has_touch_obtainable_bytes() ? GiB(s.touch_obtainable_bytes()) : "-",
                  first ? reasons : ""});
        first = false;
      }
      for (const auto& d : n.probe().device_nodes())
        t.AddRow({"", "", "dev " + std::to_string(d.numa_node()), GiB(d.total_bytes()),
                  GiB(d.free_bytes()), "-", "-", ""});
    }
    out << t.Render();
  }
  return out.str();
}

Json NodeStatusToJson(const v1::NodeStatus& n) {
  Json evidence = Json::parse(n.evidence_json(), nullptr, false);
  return Json{{"name", n.name()},
              {"state", n.state()},
              {"reason", n.reason()},
              {"evidence", evidence.is_discarded() ? Json(n.evidence_json()) : evidence},
              {"since_unix_ms", n.since_unix_ms()},
              {"expiry_unix_ms", n.expiry_unix_ms()},
              {"strikes", n.strikes()},
              {"actor", n.actor()},
              {"last_check", LastCheckToJson(n)}};
}

Json LastCheckToJson(const v1::NodeStatus& n) {
  if (n.check_started_unix_ms() == 0) return nullptr;
  return Json{{"job_id", n.check_job_id()},
              {"started_unix_ms", n.check_started_unix_ms()},
              {"ended_unix_ms", n.check_ended_unix_ms()},
              {"state", n.check_ended_unix_ms() == 0 ? "running"
                        : n.check_passed()           ? "passed"
                                                     : "failed"},
              {"summary", n.check_summary()}};
}

Json NodesToJson(const v1::ListNodesResponse& nodes) {
  Json out = Json::array();
  for (const auto& n : nodes.nodes()) out.push_back(NodeStatusToJson(n));
  return out;
}

namespace {
Json ProbeToJson(const v1::NodeProbe& p) {
  Json sockets = Json::array();
  for (const auto& s : p.sockets()) {
    Json j{{"numa_node", s.numa_node()},          {"cpulist", s.cpulist()},
           {"total_bytes", s.total_bytes()},      {"free_bytes", s.free_bytes()},
           {"file_pages_bytes", s.file_pages_bytes()}, {"anon_pages_bytes", s.anon_pages_bytes()},
           {"slab_bytes", s.slab_bytes()},        {"kernel_stack_bytes", s.kernel_stack_bytes()},
           {"page_tables_bytes", s.page_tables_bytes()}, {"shmem_bytes", s.shmem_bytes()},
           {"hugepages_bytes", s.hugepages_bytes()}, {"unattributed_bytes", s.unattributed_bytes()}};
    if (s.has_touch_obtainable_bytes()) j["touch_obtainable_bytes"] = s.touch_obtainable_bytes();
    sockets.push_back(j);
  }
  Json devices = Json::array();
  for (const auto& d : p.device_nodes())
    devices.push_back({{"numa_node", d.numa_node()},
                       {"total_bytes", d.total_bytes()},
                       {"free_bytes", d.free_bytes()}});
  return Json{{"sockets", sockets}, {"device_nodes", devices}, {"error", p.error()}};
}
}  // namespace

Json GateReportToJson(const v1::GateReportResponse& report) {
  Json gates = Json::array();
  for (const auto& g : report.gates()) {
    Json nodes = Json::array();
    for (const auto& n : g.nodes()) {
      Json reasons = Json::array();
      for (const auto& r : n.reasons()) reasons.push_back(r);
      nodes.push_back({{"node", n.node()},
                       {"decision", n.decision()},
                       {"reasons", reasons},
                       {"score", n.score()},
                       {"probe", ProbeToJson(n.probe())}});
    }
    Json policy = Json::parse(g.policy_json(), nullptr, false);
    gates.push_back({{"attempt", g.attempt()},
                     {"launch", g.launch()},
                     {"decision", g.decision()},
                     {"reason", g.reason()},
                     {"unix_ms", g.unix_ms()},
                     {"policy", policy.is_discarded() ? Json(nullptr) : policy},
                     {"nodes", nodes}});
  }
  return Json{{"run_id", report.run_id()}, {"gates", gates}};
}

}  // namespace trellis::cli
