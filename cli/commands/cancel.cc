// trellis cancel ID [--reason TEXT] [--json]

#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands/commands.h"
#include "cli/exit_status.h"
#include "cli/format.h"

namespace trellis::cli {

namespace {

struct CancelOptions {
  std::string run_id;
  std::string reason;
  bool json = false;
};

int RunCancel(const GlobalOptions& global, const CancelOptions& opt) {
  ControllerClient client(global);
  v1::CancelRunRequest req;
  req.set_run_id(opt.run_id);
  req.set_reason(opt.reason);
  v1::CancelRunResponse resp;
  auto ctx = client.UnaryContext();
  grpc::Status status = client.stub().CancelRun(ctx.get(), req, &resp);
  if (!status.ok()) return client.Fail(status);
  if (opt.json)
    std::cout << nlohmann::json{{"run_id", opt.run_id}, {"state", StateName(resp.state())}}.dump()
              << "\n";
  else
    std::cout << StateName(resp.state()) << "\n";
  return kExitOk;
}

}  // namespace

void AddCancelCommand(CLI::App& app, const GlobalOptions& global, int* exit_code) {
  auto opt = std::make_shared<CancelOptions>();
  CLI::App* cmd =
      app.add_subcommand("cancel",
                         "Cancel a run (its Slurm job too); prints the run's new state.\n"
                         "Example: trellis cancel tiny-moe-3 --reason \"wrong learning rate\"");
  cmd->add_option("ID", opt->run_id, "the run id")->required();
  cmd->add_option("--reason", opt->reason, "why, kept in the run's history (at most 1024 chars)");
  cmd->add_flag("--json", opt->json, "print {\"run_id\", \"state\"}");
  cmd->callback([&global, exit_code, opt] { *exit_code = RunCancel(global, *opt); });
}

}  // namespace trellis::cli
