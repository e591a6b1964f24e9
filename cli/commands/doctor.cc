// trellis doctor [SPEC] [--json]: is this site ready for a run? Each check one
// line (docs/architecture.md, "Doctor"): this CLI against the controller, then
// the controller's own checks of Slurm, munge, partition and account, its
// store and lease, and a compute node reached by srun. Exit 0 when nothing
// failed, 1 when something did, 5 when the controller cannot be reached.

#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands/commands.h"
#include "cli/exit_status.h"
#include "common/check_line.h"
#include "common/version.h"

namespace trellis::cli {
namespace {

struct DoctorOptions {
  std::string spec;
  bool json = false;
};

void Print(const std::vector<CheckLine>& lines, bool json) {
  if (!json) {
    for (const auto& l : lines) std::cout << FormatCheckLine(l) << "\n";
    return;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& l : lines)
    out.push_back({{"check", l.name}, {"verdict", VerdictWord(l.verdict)}, {"detail", l.detail}});
  std::cout << out.dump(2) << "\n";
}

int RunDoctor(const GlobalOptions& global, const DoctorOptions& opt) {
  v1::DoctorRequest req;
  if (!opt.spec.empty()) {
    std::string error;
    std::optional<std::string> text = ReadSpecFile(opt.spec, &error);
    if (!text) {
      PrintError(error);
      return kExitUsage;
    }
    req.set_spec_toml(*text);
  }
  ControllerClient client(global);
  v1::DoctorResponse resp;
  auto ctx = client.UnaryContext();
  // The srun on a compute node may wait for a node: minutes, not --timeout.
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  grpc::Status status = client.stub().Doctor(ctx.get(), req, &resp);
  std::vector<CheckLine> lines;
  if (!status.ok() && status.error_code() != grpc::StatusCode::UNAVAILABLE)
    return client.Fail(status);  // refused, too old a controller, ...
  if (!status.ok()) {
    lines.push_back({"controller", CheckLine::Verdict::kFail,
                     "no answer from " + client.addr() + " (" + status.error_message() +
                         "); start it (trellis-controller --config FILE), or point --addr, "
                         "TRELLIS_ADDR or TRELLIS_STATE_DIR at it. `trellis-controller --check` "
                         "runs the other checks without one"});
    Print(lines, opt.json);
    return kExitUnreachable;
  }
  const bool same = resp.controller_version() == kVersion;
  lines.push_back({"controller", same ? CheckLine::Verdict::kOk : CheckLine::Verdict::kFail,
                   "reached " + client.addr() + ", version " + resp.controller_version() +
                       (same ? ""
                             : "; this trellis is " + std::string(kVersion) +
                                   ": use the CLI of the controller's install")});
  for (const auto& r : resp.results()) {
    auto l = ParseCheckLineJson(
        nlohmann::json{{"check", r.check()}, {"verdict", r.verdict()}, {"detail", r.detail()}}
            .dump());
    lines.push_back(l.ok() ? *l
                           : CheckLine{r.check(), CheckLine::Verdict::kFail,
                                       "unreadable verdict '" + r.verdict() + "': " + r.detail()});
  }
  Print(lines, opt.json);
  return AnyFailed(lines) ? kExitRunFailed : kExitOk;
}

}  // namespace

void AddDoctorCommand(CLI::App& app, const GlobalOptions& global, int* exit_code) {
  auto opt = std::make_shared<DoctorOptions>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Check that runs can start here, each check one line (ok, or what is wrong and what to\n"
      "do): the controller, Slurm's commands and controller, munge, the partition and account,\n"
      "the controller's store and lease, and one compute node reached by srun (the worker\n"
      "binary and paths visible there, the controller reachable from it, NUMA memory, GPUs and\n"
      "NCCL). With a spec: its partition, account, GPUs and data. Exit 1 when a check failed.\n"
      "Example: trellis doctor examples/tiny-moe-2x2.toml");
  cmd->add_option("SPEC", opt->spec,
                  "a run spec whose partition, account, GPUs and paths to check");
  cmd->add_flag("--json", opt->json, "print [{\"check\", \"verdict\", \"detail\"}, ...]");
  cmd->callback([&global, exit_code, opt] { *exit_code = RunDoctor(global, *opt); });
}

}  // namespace trellis::cli
