#include "controller/app/gate_json.h"

#include <nlohmann/json.hpp>

namespace trellis::controller {
namespace {

using Json = nlohmann::json;

Json ProbeJson(const NodeProbe& p) {
  Json sockets = Json::array();
  for (const auto& s : p.sockets) {
    Json j{{"numa_node", s.numa_node},
           {"cpulist", s.cpulist},
           {"total_bytes", s.total_bytes},
           {"free_bytes", s.free_bytes},
           {"file_pages_bytes", s.file_pages_bytes},
           {"anon_pages_bytes", s.anon_pages_bytes},
           {"slab_bytes", s.slab_bytes},
           {"kernel_stack_bytes", s.kernel_stack_bytes},
           {"page_tables_bytes", s.page_tables_bytes},
           {"shmem_bytes", s.shmem_bytes},
           {"hugepages_bytes", s.hugepages_bytes},
           {"unattributed_bytes", s.unattributed_bytes}};
    if (s.touch_obtainable_bytes) j["touch_obtainable_bytes"] = *s.touch_obtainable_bytes;
    sockets.push_back(j);
  }
  Json devices = Json::array();
  for (const auto& d : p.device_nodes)
    devices.push_back(
        {{"numa_node", d.numa_node}, {"total_bytes", d.total_bytes}, {"free_bytes", d.free_bytes}});
  Json out{{"sockets", sockets}, {"device_nodes", devices}};
  if (!p.error.empty()) out["error"] = p.error;
  if (p.probed_unix_ms != 0) out["probed_unix_ms"] = p.probed_unix_ms;
  return out;
}

NodeProbe ProbeFrom(const Json& j) {
  NodeProbe p;
  for (const auto& s : j.value("sockets", Json::array())) {
    SocketProbe f;
    f.numa_node = s.value("numa_node", 0);
    f.cpulist = s.value("cpulist", "");
    f.total_bytes = s.value("total_bytes", int64_t{0});
    f.free_bytes = s.value("free_bytes", int64_t{0});
    f.file_pages_bytes = s.value("file_pages_bytes", int64_t{0});
    f.anon_pages_bytes = s.value("anon_pages_bytes", int64_t{0});
    f.slab_bytes = s.value("slab_bytes", int64_t{0});
    f.kernel_stack_bytes = s.value("kernel_stack_bytes", int64_t{0});
    f.page_tables_bytes = s.value("page_tables_bytes", int64_t{0});
    f.shmem_bytes = s.value("shmem_bytes", int64_t{0});
    f.hugepages_bytes = s.value("hugepages_bytes", int64_t{0});
    f.unattributed_bytes = s.value("unattributed_bytes", int64_t{0});
    if (s.contains("touch_obtainable_bytes"))
      f.touch_obtainable_bytes = s["touch_obtainable_bytes"].get<int64_t>();
    p.sockets.push_back(f);
  }
  for (const auto& d : j.value("device_nodes", Json::array()))
    p.device_nodes.push_back({d.value("numa_node", 0), d.value("total_bytes", int64_t{0}),
                              d.value("free_bytes", int64_t{0})});
  p.error = j.value("error", "");
  p.probed_unix_ms = j.value("probed_unix_ms", int64_t{0});
  return p;
}

}  // namespace

std::string ProbeToJson(const NodeProbe& probe) { return ProbeJson(probe).dump(); }

std::string PolicyToJson(const GatePolicy& p) {
  return Json{{"min_free_gib_per_socket", p.min_free_gib_per_socket},
              {"max_unattributed_gib_per_socket", p.max_unattributed_gib_per_socket},
              {"timeout_s", p.timeout.count()},
              {"touch_probe", p.touch_probe},
              {"rank_host_gib", static_cast<double>(p.rank_host_bytes) / kGiB},
              {"rank_host_what", p.rank_host_what},
              {"ranks_per_node", p.ranks_per_node}}
      .dump();
}

std::string NodeGatesToJson(const std::vector<NodeGateView>& nodes) {
  Json out = Json::array();
  for (const auto& n : nodes)
    out.push_back({{"node", n.node},
                   {"decision", n.decision},
                   {"reasons", n.reasons},
                   {"score", n.score},
                   {"probe", ProbeJson(n.probe)}});
  return out.dump();
}

absl::StatusOr<std::vector<NodeGateView>> NodeGatesFromJson(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  if (!j.is_array()) return absl::DataLossError("gate record: nodes_json is not an array");
  std::vector<NodeGateView> out;
  try {
    for (const auto& n : j) {
      NodeGateView v;
      v.node = n.value("node", "");
      v.decision = n.value("decision", "");
      v.reasons = n.value("reasons", std::vector<std::string>{});
      v.score = n.value("score", 0.0);
      v.probe = ProbeFrom(n.value("probe", Json::object()));
      out.push_back(std::move(v));
    }
  } catch (const Json::exception& e) {
    return absl::DataLossError(std::string("gate record: ") + e.what());
  }
  return out;
}

}  // namespace trellis::controller
