#include "controller/app/worker_reports.h"

#include <nlohmann/json.hpp>

namespace trellis::controller {

using Json = nlohmann::json;

WorkerReportRecord WorkerReportRecordOf(const WorkerId& id, WallTime time,
                                        const WorkerReport& report) {
  Json ranks = Json::array();
  for (const RankExitInfo& e : report.ranks)
    ranks.push_back({{"node", e.node},
                     {"rank", e.rank},
                     {"exit_code", e.exit_code},
                     {"signal", e.signal},
                     {"after_stop", e.after_stop},
                     {"markers", e.markers},
                     {"evidence_line", e.evidence_line}});
  WorkerReportRecord r;
  r.run_id = id.run_id;
  r.attempt = id.attempt;
  r.launch = id.launch;
  r.node = id.node;
  r.time = time;
  r.exit_code = report.exit_code;
  r.reason = report.reason;
  r.oom_kills = report.oom_kills;
  r.time_limit_warned = report.time_limit_warned;
  // Replaced, not failed: a worker's log line need not be valid UTF-8.
  r.ranks_json = ranks.dump(-1, ' ', false, Json::error_handler_t::replace);
  return r;
}

absl::StatusOr<WorkerReport> WorkerReportFromRecord(const WorkerReportRecord& record) {
  const std::string what = "final report of " + record.node + " on launch " +
                           std::to_string(record.attempt) + "." + std::to_string(record.launch);
  Json ranks = Json::parse(record.ranks_json, nullptr, false);
  if (!ranks.is_array()) return absl::DataLossError(what + ": its ranks are not a JSON array");
  WorkerReport report;
  report.oom_kills = record.oom_kills;
  report.time_limit_warned = record.time_limit_warned;
  report.exit_code = record.exit_code;
  report.reason = record.reason;
  try {
    for (const Json& j : ranks) {
      RankExitInfo e;
      e.node = j.at("node").get<std::string>();
      e.rank = j.at("rank").get<int>();
      e.exit_code = j.at("exit_code").get<int>();
      e.signal = j.at("signal").get<int>();
      e.after_stop = j.at("after_stop").get<bool>();
      e.markers = j.at("markers").get<std::vector<std::string>>();
      e.evidence_line = j.at("evidence_line").get<std::string>();
      report.ranks.push_back(std::move(e));
    }
  } catch (const Json::exception& ex) {
    return absl::DataLossError(what + ": " + ex.what());
  }
  return report;
}

}  // namespace trellis::controller
