// trellis ls [--active] [--limit N] [--json]
// trellis show ID [--json] [--utc] [--ranks-from R]

#include <iostream>
#include <memory>

#include "cli/commands/commands.h"
#include "cli/exit_status.h"
#include "cli/format.h"
#include "cli/render.h"
#include "common/clock.h"

namespace trellis::cli {

namespace {

struct ListOptions {
  bool active = false;
  int limit = 0;
  bool json = false;
};

struct ShowOptions {
  std::string run_id;
  bool json = false;
  bool utc = false;
  int ranks_from = 0;
};

int RunList(const GlobalOptions& global, const ListOptions& opt) {
  ControllerClient client(global);
  v1::ListRunsRequest req;
  req.set_limit(opt.limit);
  req.set_active_only(opt.active);
  v1::ListRunsResponse resp;
  auto ctx = client.UnaryContext();
  grpc::Status status = client.stub().ListRuns(ctx.get(), req, &resp);
  if (!status.ok()) return client.Fail(status);
  if (opt.json) {
    std::cout << RunListToJson(resp).dump(2) << "\n";
  } else {
    std::cout << RenderRunList(resp, TextOptions{ToUnixMillis(SystemClock().Now()), false});
  }
  return kExitOk;
}

int RunShow(const GlobalOptions& global, const ShowOptions& opt) {
  ControllerClient client(global);
  v1::GetRunRequest req;
  req.set_run_id(opt.run_id);
  // The ranks' latest records: a page of them for the text (a row each), the
  // controller's page (up to 4096) for --json.
  req.set_include_ranks(true);
  req.set_ranks_from(opt.ranks_from);
  req.set_ranks_limit(opt.json ? 0 : kShowRankRows);
  v1::Run run;
  auto ctx = client.UnaryContext();
  grpc::Status status = client.stub().GetRun(ctx.get(), req, &run);
  if (!status.ok()) return client.Fail(status);
  if (opt.json) {
    // Log lines quoted in reasons and evidence may be cut inside a UTF-8
    // character: print a replacement character rather than fail.
    std::cout << RunToJson(run, /*with_ranks=*/true)
                     .dump(2, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace)
              << "\n";
  } else {
    std::cout << RenderRun(run, TextOptions{ToUnixMillis(SystemClock().Now()), opt.utc});
  }
  return kExitOk;
}

}  // namespace

void AddListCommand(CLI::App& app, const GlobalOptions& global, int* exit_code) {
  auto opt = std::make_shared<ListOptions>();
  CLI::App* cmd = app.add_subcommand(
      "ls", "List runs, newest first.\nExample: trellis ls --active --limit 20");
  cmd->add_flag("--active", opt->active, "only runs that have not ended");
  cmd->add_option("--limit", opt->limit, "at most N runs (default: the controller's, 100)")
      ->check(CLI::Range(1, 10000));
  cmd->add_flag("--json", opt->json, "print a JSON array of run summaries");
  cmd->callback([&global, exit_code, opt] { *exit_code = RunList(global, *opt); });
}

void AddShowCommand(CLI::App& app, const GlobalOptions& global, int* exit_code) {
  auto opt = std::make_shared<ShowOptions>();
  CLI::App* cmd =
      app.add_subcommand(
          "show", "A run's state, attempts, event history and recent steps.\n"
                  "Example: trellis show tiny-moe-3 --json");
  cmd->add_option("ID", opt->run_id, "the run id")->required();
  cmd->add_flag("--json", opt->json, "print the run as one JSON object");
  cmd->add_flag("--utc", opt->utc, "times in UTC instead of local time");
  cmd->add_option("--ranks-from", opt->ranks_from,
                  "the ranks' latest records from this rank on (a page of them)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->callback([&global, exit_code, opt] { *exit_code = RunShow(global, *opt); });
}

}  // namespace trellis::cli
