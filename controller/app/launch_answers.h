#pragma once
// What was decided about a launch, as the store keeps it, answering the same
// question asked again: a worker that registers once the gate has decided (its
// GO lost with a killed controller), a batch script that asks again what
// follows a launch that was settled. After a controller restart the GO some
// nodes already act on stays the launch's GO (a second gate could start the
// same ranks elsewhere), and a relaunch announced stays announced.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/app/views.h"
#include "controller/store/records.h"

namespace trellis::controller {

// What a launch's GO decided, as its row keeps it (LaunchRecord::go_json):
// the answer every node shares, and what a restarted controller needs to go
// on watching, stopping and settling the launch (launch_resume.cc).
struct GoRecord {
  // The fields every node's GO shares (ranks, master, resume step,
  // checkpoint directory); node_index, rank_offset and data_roots are per
  // node or per controller, and not kept.
  GateAnswer go;
  SlurmStep step;  // the launch's srun step; empty outside Slurm
  // Every node the launch may use: those that registered (spares too) and
  // those it was planned on. A relaunch picks its nodes from these.
  std::vector<std::string> allocation;
  std::map<std::string, std::string> metrics_addrs;  // node -> its worker's /metrics
  // The workers' final reports are stored (schema 7): a controller started
  // again can tell a finished worker from a lost one. False in a record a
  // controller of schema 6 wrote.
  bool reports_kept = true;
};
std::string GoRecordToJson(const GoRecord& record);
// A record without step, allocation or metrics addresses reads them as empty.
absl::StatusOr<GoRecord> GoRecordFromJson(const std::string& text);

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
