// trellis nodes | quarantine NODE --reason R | release NODE | gate-report RUN

#include <chrono>
#include <iostream>
#include <memory>

#include "cli/commands/commands.h"
#include "cli/exit_status.h"
#include "cli/format_nodes.h"

namespace trellis::cli {

namespace {

struct NodeOptions {
  std::string node;
  std::string reason;
  std::string run_id;
  int attempt = 0;
  bool json = false;
  bool utc = false;
  bool forget = false;  // release --forget
};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int RunNodes(const GlobalOptions& global, const NodeOptions& opt) {
  ControllerClient client(global);
  v1::ListNodesResponse resp;
  auto ctx = client.UnaryContext();
  grpc::Status status = client.stub().ListNodes(ctx.get(), v1::ListNodesRequest(), &resp);
  if (!status.ok()) return client.Fail(status);
  if (opt.json)
    std::cout << NodesToJson(resp).dump(2) << "\n";
  else
    std::cout << RenderNodes(resp, NowMs(), opt.utc);
  return kExitOk;
}

int RunQuarantine(const GlobalOptions& global, const NodeOptions& opt) {
  ControllerClient client(global);
  v1::QuarantineNodeRequest req;
  req.set_node(opt.node);
  req.set_reason(opt.reason);
  v1::NodeStatus resp;
  auto ctx = client.UnaryContext();
  grpc::Status status = client.stub().QuarantineNode(ctx.get(), req, &resp);
  if (!status.ok()) return client.Fail(status);
  if (opt.json) {
    std::cout << NodeStatusToJson(resp).dump(2) << "\n";
    return kExitOk;
  }
  std::cout << resp.name() << " " << resp.state() << " (strike " << resp.strikes()
            << ", until released)\n";
  return kExitOk;
}

int RunRelease(const GlobalOptions& global, const NodeOptions& opt) {
  ControllerClient client(global);
  v1::ReleaseNodeRequest req;
  req.set_node(opt.node);
  req.set_forget(opt.forget);
  v1::NodeStatus resp;
  auto ctx = client.UnaryContext();
  grpc::Status status = client.stub().ReleaseNode(ctx.get(), req, &resp);
  if (!status.ok()) return client.Fail(status);
  if (opt.json)
    std::cout << NodeStatusToJson(resp).dump(2) << "\n";
  else if (opt.forget)
    std::cout << resp.name() << " forgotten: out of the list, its strikes with it\n";
  else
    std::cout << resp.name() << " " << resp.state() << " (" << resp.strikes()
              << " strike(s) kept; another doubles the time)\n";
  return kExitOk;
}

int RunGateReport(const GlobalOptions& global, const NodeOptions& opt) {
  ControllerClient client(global);
  v1::GateReportRequest req;
  req.set_run_id(opt.run_id);
  req.set_attempt(opt.attempt);
  v1::GateReportResponse resp;
  auto ctx = client.UnaryContext();
  grpc::Status status = client.stub().GateReport(ctx.get(), req, &resp);
  if (!status.ok()) return client.Fail(status);
  if (opt.json)
    std::cout << GateReportToJson(resp).dump(2) << "\n";
  else
    std::cout << RenderGateReport(resp, opt.utc);
  return kExitOk;
}

}  // namespace

void AddNodeCommands(CLI::App& app, const GlobalOptions& global, int* exit_code) {
  auto opt = std::make_shared<NodeOptions>();
  CLI::App* nodes = app.add_subcommand(
      "nodes",
      "The controller's quarantine list: node, state, strikes, until when, why.\n"
      "Example: trellis nodes --utc");
  nodes->add_flag("--json", opt->json, "print JSON (cli/README.md)");
  nodes->add_flag("--utc", opt->utc, "times in UTC");
  nodes->callback([&global, exit_code, opt] { *exit_code = RunNodes(global, *opt); });

  CLI::App* q = app.add_subcommand(
      "quarantine",
      "Keep a node out of every submission (--exclude) until it is released.\n"
      "Example: trellis quarantine node7 --reason \"flaky InfiniBand port\"");
  q->add_option("NODE", opt->node, "Slurm node name")->required();
  q->add_option("--reason", opt->reason, "why (required; kept with the entry)")->required();
  q->add_flag("--json", opt->json, "print the node's entry as JSON (as `nodes --json` lists it)");
  q->callback([&global, exit_code, opt] { *exit_code = RunQuarantine(global, *opt); });

  CLI::App* r = app.add_subcommand(
      "release",
      "Let a quarantined node back in, on probation (its strikes are kept).\n"
      "Example: trellis release node7");
  r->add_option("NODE", opt->node, "Slurm node name")->required();
  r->add_flag("--forget", opt->forget,
              "take the node out of the list altogether, its strikes with it (a node replaced, "
              "or a name that was a mistake)");
  r->add_flag("--json", opt->json, "print the node's entry as JSON (as `nodes --json` lists it)");
  r->callback([&global, exit_code, opt] { *exit_code = RunRelease(global, *opt); });

  CLI::App* g = app.add_subcommand(
      "gate-report",
      "Per node and socket memory figures, the gate's decisions and reasons.\n"
      "Example: trellis gate-report tiny-moe-3 --attempt 1");
  g->add_option("RUN", opt->run_id, "the run id")->required();
  g->add_option("--attempt", opt->attempt, "only this attempt (default: all)");
  g->add_flag("--json", opt->json, "print JSON (cli/README.md)");
  g->add_flag("--utc", opt->utc, "times in UTC");
  g->callback([&global, exit_code, opt] { *exit_code = RunGateReport(global, *opt); });
}

}  // namespace trellis::cli
