#pragma once
// What was decided about a launch, as the store keeps it, answering the same
// question asked again: a worker that registers once the gate has decided (its
// GO lost with a killed controller), a batch script that asks again what
// follows a launch that was settled. After a controller restart the GO some
// nodes already act on stays the launch's GO (a second gate could start the
// same ranks elsewhere), and a relaunch announced stays announced.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/app/views.h"
#include "controller/store/records.h"

namespace trellis::controller {

// The fields every node's GO shares (ranks, master, resume step, checkpoint
// directory); node_index, rank_offset and data_roots are per node or per
// controller, and not kept.
std::string GoToJson(const GateAnswer& go);
absl::StatusOr<GateAnswer> GoFromJson(const std::string& text);

// What a launch's GO (`go`: its shared fields; `go_nodes`: rank order) says to
// `node`: GO at its place in the rank order, or STANDBY for a node left out.
// `launch` names the launch ("attempt.launch") in the STANDBY reason.
GateAnswer AnswerForNode(const GateAnswer& go, const std::vector<std::string>& go_nodes,
                         const std::string& node, const std::string& launch);

// The answer to `node` registering again for the launch of `row`, decided
// before: GO with its place in the row's rank order, STANDBY for a node the
// GO left out, ABORT once the launch ended or when the row kept no GO (a
// database of schema 5).
GateAnswer AnswerDecidedLaunch(const LaunchRecord& row, const std::string& node);

// The answer to the batch script asking again what follows the settled launch
// of `row` (recovery "relaunch", "succeed", "new_attempt" or "fail"): the
// relaunch announced while `relaunch_due` (the run still RESTARTING, its
// attempt live), else the exit code the launch ended with.
NextLaunchAnswer AnswerSettledLaunch(const LaunchRecord& row, bool relaunch_due);

}  // namespace trellis::controller
