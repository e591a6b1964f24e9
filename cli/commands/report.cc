// trellis report RUN [RUN...] --html FILE [--utc]

#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands/commands.h"
#include "cli/exit_status.h"
#include "cli/report/compare_page.h"
#include "cli/report/report_page.h"
#include "common/atomic_file.h"
#include "common/clock.h"

namespace trellis::cli {

namespace {

namespace fs = std::filesystem;

struct ReportOptions {
  std::vector<std::string> run_ids;  // one: its report; more: them compared
  std::string run_id;
  std::string html;  // "-": standard output
  bool utc = false;
};

// GetRun pages at most this many ranks; a bound on the pages guards against a
// controller whose ranks_next never ends.
constexpr int kRanksPage = 4096;
constexpr int kMaxRankPages = 1 << 12;

// Why `path` cannot be written to, or "" when its directory is there.
std::string DestinationProblem(const std::string& path) {
  fs::path p(path);
  if (p.filename().empty()) return "--html: '" + path + "' names a directory, not a file";
  fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return "--html: the directory '" + dir.string() + "' does not exist";
  if (fs::is_directory(p, ec)) return "--html: '" + path + "' is a directory";
  return "";
}

// GetRun with every page of the ranks' latest records, all of one launch (a
// newer launch that starts reporting between pages ends the paging).
grpc::Status GetRunWithRanks(ControllerClient& client, const std::string& run_id,
                             report::ReportInput* in) {
  int from = 0;
  for (int page = 0; page < kMaxRankPages; ++page) {
    v1::GetRunRequest req;
    req.set_run_id(run_id);
    req.set_include_ranks(true);
    req.set_ranks_from(from);
    req.set_ranks_limit(kRanksPage);
    v1::Run run;
    auto ctx = client.UnaryContext();
    grpc::Status status = client.stub().GetRun(ctx.get(), req, &run);
    if (!status.ok()) return status;
    for (const auto& r : run.ranks()) {
      const auto& first = in->ranks.empty() ? r : in->ranks.front();
      if (r.attempt() != first.attempt() || r.launch() != first.launch()) return grpc::Status::OK;
      in->ranks.push_back(r);
    }
    int next = run.ranks_next();
    if (page == 0) {
      run.clear_ranks();
      in->run = std::move(run);
    }
    if (next <= from) break;
    from = next;
  }
  return grpc::Status::OK;
}

// The page to `opt.html` (atomically) or standard output.
int WritePage(const ReportOptions& opt, const std::string& page) {
  if (opt.html == "-") {
    std::cout << page << std::flush;
    return std::cout ? kExitOk : kExitRunFailed;
  }
  // Atomically: a reader (a browser reloading it, a web server) never sees half a page.
  if (absl::Status st = WriteFileAtomically(opt.html, page); !st.ok()) {
    PrintError(std::string(st.message()));
    return kExitRunFailed;
  }
  std::cout << "wrote " << opt.html << "\n";
  return kExitOk;
}

// Several runs on one page: each one's GetRun and RunSteps.
int RunComparison(const GlobalOptions& global, const ReportOptions& opt) {
  ControllerClient client(global);
  std::vector<report::ComparedRun> runs;
  for (const std::string& id : opt.run_ids) {
    report::ComparedRun r;
    v1::GetRunRequest req;
    req.set_run_id(id);
    auto ctx = client.UnaryContext();
    grpc::Status status = client.stub().GetRun(ctx.get(), req, &r.run);
    if (!status.ok()) return client.Fail(status);
    v1::RunStepsRequest steps_req;
    steps_req.set_run_id(id);
    v1::RunStepsResponse steps;
    auto steps_ctx = client.UnaryContext();
    status = client.stub().RunSteps(steps_ctx.get(), steps_req, &steps);
    if (status.ok())
      r.steps = std::move(steps);
    else if (status.error_code() != grpc::StatusCode::UNIMPLEMENTED)
      return client.Fail(status);
    runs.push_back(std::move(r));
  }
  return WritePage(opt, report::RenderComparison(runs, ToUnixMillis(SystemClock().Now()),
                                                 opt.utc));
}

int RunReport(const GlobalOptions& global, const ReportOptions& given) {
  // Refused before the controller is asked: nothing to undo.
  if (given.html != "-") {
    if (std::string problem = DestinationProblem(given.html); !problem.empty()) {
      PrintError(problem);
      return kExitUsage;
    }
  }
  if (given.run_ids.size() > 1) return RunComparison(global, given);
  ReportOptions opt = given;
  opt.run_id = given.run_ids.front();
  ControllerClient client(global);
  report::ReportInput in;
  in.utc = opt.utc;
  grpc::Status status = GetRunWithRanks(client, opt.run_id, &in);
  if (!status.ok()) return client.Fail(status);

  v1::RunStepsRequest steps_req;
  steps_req.set_run_id(opt.run_id);
  v1::RunStepsResponse steps;
  auto steps_ctx = client.UnaryContext();
  status = client.stub().RunSteps(steps_ctx.get(), steps_req, &steps);
  if (status.ok()) {
    in.steps = std::move(steps);
  } else if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    in.steps_note =
        "this controller does not serve the step history (RunSteps): it is older "
        "than this trellis";
  } else {
    return client.Fail(status);
  }

  v1::GateReportRequest gate_req;
  gate_req.set_run_id(opt.run_id);
  v1::GateReportResponse gate;
  auto gate_ctx = client.UnaryContext();
  status = client.stub().GateReport(gate_ctx.get(), gate_req, &gate);
  if (!status.ok()) return client.Fail(status);
  in.gate = std::move(gate);

  in.generated_ms = ToUnixMillis(SystemClock().Now());
  return WritePage(opt, report::RenderReport(in));
}

}  // namespace

void AddReportCommand(CLI::App& app, const GlobalOptions& global, int* exit_code) {
  auto opt = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "One self-contained HTML page of a run: charts of its steps, ranks, gate, events; of "
      "several runs, their loss, tokens/s and step time on shared charts and the keys where "
      "their specs differ.\n"
      "Example: trellis report tiny-moe-3 tiny-fork-5 --html compare.html");
  cmd->add_option("RUN", opt->run_ids, "the run id (several: them compared)")->required();
  cmd->add_option("--html", opt->html, "the file to write (- for standard output)")->required();
  cmd->add_flag("--utc", opt->utc, "times in UTC instead of local time");
  cmd->callback([&global, exit_code, opt] { *exit_code = RunReport(global, *opt); });
}

}  // namespace trellis::cli
