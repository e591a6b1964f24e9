#pragma once
// Text and JSON views of the node verbs: nodes, gate-report (pure).

#include <string>

#include "cli/format.h"

namespace trellis::cli {

std::string GiB(int64_t bytes);  // "72.7 GiB"
std::string RenderNodes(const v1::ListNodesResponse& nodes, int64_t now_ms, bool utc);
// The node's newest certification check in a few words ("-": none).
std::string RenderLastCheck(const v1::NodeStatus& n, int64_t now_ms);
// A gate policy (GateRecord.policy_json) in a line or two: "policy: free >=
// 100.0 GiB and ...", and what a [model] run's ranks add per socket; empty
// when the JSON is not an object.
std::string RenderGatePolicy(const std::string& policy_json);
// What a user sends to the site's admins: per node and socket figures, the
// decision and the reasons.
std::string RenderGateReport(const v1::GateReportResponse& report, bool utc);

Json NodeStatusToJson(const v1::NodeStatus& n);
// {job_id, started_unix_ms, ended_unix_ms, state: running|passed|failed,
// summary}, or null when the node was never checked.
Json LastCheckToJson(const v1::NodeStatus& n);
Json NodesToJson(const v1::ListNodesResponse& nodes);
Json GateReportToJson(const v1::GateReportResponse& report);

}  // namespace trellis::cli
