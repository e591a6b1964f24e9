#include "controller/app/launch_answers.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace trellis::controller {

using Json = nlohmann::json;

std::string GoRecordToJson(const GoRecord& record) {
  const GateAnswer& go = record.go;
  return Json{{"reason", go.reason},
              {"ranks_per_node", go.ranks_per_node},
              {"world_size", go.world_size},
              {"master_addr", go.master_addr},
              {"master_port", go.master_port},
              {"resume_step", go.resume_step},
              {"checkpoint_dir", go.checkpoint_dir},
              {"mtbf_s", go.mtbf_s},
              {"mtbf_basis", go.mtbf_basis},
              {"slurm_job_id", record.step.job_id},
              {"slurm_step_id", record.step.step_id},
              {"allocation", record.allocation},
              {"metrics_addrs", record.metrics_addrs},
              {"reports_kept", record.reports_kept}}
      .dump();
}

absl::StatusOr<GoRecord> GoRecordFromJson(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  if (!j.is_object()) return absl::DataLossError("launch GO record is not a JSON object");
  GoRecord record;
  GateAnswer& go = record.go;
  go.kind = GateAnswer::kGo;
  try {
    go.reason = j.at("reason").get<std::string>();
    go.ranks_per_node = j.at("ranks_per_node").get<int>();
    go.world_size = j.at("world_size").get<int>();
    go.master_addr = j.at("master_addr").get<std::string>();
    go.master_port = j.at("master_port").get<int>();
    go.resume_step = j.at("resume_step").get<int64_t>();
    go.checkpoint_dir = j.at("checkpoint_dir").get<std::string>();
    go.mtbf_s = j.value("mtbf_s", 0.0);  // GO records before it have none
    go.mtbf_basis = j.value("mtbf_basis", "");
    record.step.job_id = j.value("slurm_job_id", "");
    record.step.step_id = j.value("slurm_step_id", "");
    record.allocation = j.value("allocation", std::vector<std::string>{});
    record.metrics_addrs = j.value("metrics_addrs", std::map<std::string, std::string>{});
    record.reports_kept = j.value("reports_kept", false);
  } catch (const Json::exception& e) {
    return absl::DataLossError(std::string("launch GO record: ") + e.what());
  }
  if (go.ranks_per_node < 1 || go.world_size < go.ranks_per_node)
    return absl::DataLossError("launch GO record: " + std::to_string(go.world_size) +
                               " rank(s), " + std::to_string(go.ranks_per_node) + " per node");
  return record;
}

GateAnswer AnswerForNode(const GateAnswer& go, const std::vector<std::string>& go_nodes,
                         const std::string& node, const std::string& launch) {
  GateAnswer answer = go;
  auto at = std::find(go_nodes.begin(), go_nodes.end(), node);
  if (at == go_nodes.end()) {
    answer.kind = GateAnswer::kStandby;
    answer.reason = "the gate of launch " + launch + " already decided: " +
                    absl::StrJoin(go_nodes, ", ") + " go";
    return answer;
  }
  answer.kind = GateAnswer::kGo;
  answer.node_index = static_cast<int>(at - go_nodes.begin());
  answer.rank_offset = answer.node_index * answer.ranks_per_node;
  return answer;
}

GateAnswer AnswerDecidedLaunch(const LaunchRecord& row, const std::string& node) {
  const std::string launch = std::to_string(row.attempt) + "." + std::to_string(row.launch);
  if (row.ended)
    return GateAnswer::Abort("launch " + launch + " already ended" +
                             (row.reason.empty() ? "" : " (" + row.reason + ")") +
                             "; this worker registered late");
  if (row.go_json.empty())
    return GateAnswer::Abort("the gate of launch " + launch +
                             " decided before the controller restarted, and what it told the "
                             "nodes was not kept (a store older than schema 6)");
  absl::StatusOr<GoRecord> record = GoRecordFromJson(row.go_json);
  if (!record.ok()) return GateAnswer::Abort(std::string(record.status().message()));
  return AnswerForNode(record->go, absl::StrSplit(row.nodes, ',', absl::SkipEmpty()), node, launch);
}

NextLaunchAnswer AnswerSettledLaunch(const LaunchRecord& row, bool relaunch_due) {
  NextLaunchAnswer answer;
  const std::string launch = std::to_string(row.attempt) + "." + std::to_string(row.launch);
  if (row.recovery == "relaunch" && relaunch_due && !row.next_nodes.empty()) {
    answer.relaunch = true;
    answer.next_launch = row.launch + 1;
    answer.nodes = absl::StrSplit(row.next_nodes, ',', absl::SkipEmpty());
    answer.reason = "launch " + launch + " ended (" + row.reason + "); asked again: relaunch " +
                    std::to_string(answer.next_launch) + " on " + absl::StrJoin(answer.nodes, ", ");
    return answer;
  }
  answer.exit_code = row.exit_code.value_or(row.recovery == "succeed" ? 0 : 1);
  answer.reason = "launch " + launch + " ended (" + row.reason + "); asked again: " +
                  (row.recovery == "relaunch" ? "its relaunch is no longer due"
                                              : "exit " + std::to_string(answer.exit_code));
  return answer;
}

}  // namespace trellis::controller
