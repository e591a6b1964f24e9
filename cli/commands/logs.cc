// trellis logs ID [--rank R | --node N | --batch] [--attempt A] [--launch L] [--tail N]
//                [--since WHEN] [--timestamps] [--follow] [--json]

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands/commands.h"
#include "cli/exit_status.h"
#include "cli/format.h"

namespace trellis::cli {

namespace {

struct LogsOptions {
  std::string run_id;
  int rank = -1;
  bool follow = false;
  int attempt = 0;
  int launch = 0;
  std::string node;
  int tail = 0;
  bool batch = false;
  std::string since;
  bool timestamps = false;
  bool json = false;
};

int RunLogs(const GlobalOptions& global, const LogsOptions& opt) {
  v1::ReadLogsRequest req;
  if (!opt.since.empty()) {
    std::string error;
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    auto since = ParseSince(opt.since, now_ms, &error);
    if (!since) {
      PrintError(error);
      return kExitUsage;
    }
    req.set_since_unix_ms(std::max<int64_t>(1, *since));
  }
  req.set_timestamps(opt.timestamps);
  ControllerClient client(global);
  req.set_run_id(opt.run_id);
  req.set_rank(opt.rank);
  req.set_follow(opt.follow);
  req.set_attempt(opt.attempt);
  req.set_launch(opt.launch);
  req.set_node(opt.node);
  req.set_tail_lines(opt.tail);
  req.set_batch_script(opt.batch);
  auto ctx = client.StreamContext();
  auto reader = client.stub().ReadLogs(ctx.get(), req);
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) {
    if (opt.json) {
      // One object per chunk, a line each: {"rank": R (-1: the batch script), "data": "..."}.
      nlohmann::json j{{"rank", chunk.rank()}, {"data", chunk.data()}};
      std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
      continue;
    }
    std::cout.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    std::cout.flush();
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return client.Fail(status);
  return kExitOk;
}

}  // namespace

void AddLogsCommand(CLI::App& app, const GlobalOptions& global, int* exit_code) {
  auto opt = std::make_shared<LogsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "logs",
      "Print the ranks' output of a run's latest launch (or of the launch, node or rank asked)"
      ".\nExample: trellis logs tiny-moe-3 --attempt 1 --launch 2 --node node2 --tail 20\n"
      "Example: trellis logs tiny-moe-3 --since 10m --timestamps --follow");
  cmd->add_option("ID", opt->run_id, "the run id")->required();
  cmd->add_option("--rank", opt->rank, "one rank's output (default -1: every rank, prefixed)")
      ->check(CLI::Range(-1, 1 << 24));
  cmd->add_flag("--follow,-f", opt->follow, "keep printing new output until the run ends");
  cmd->add_option("--attempt", opt->attempt, "attempt number (default 0: the latest)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--launch", opt->launch, "launch of the attempt (default 0: its latest)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--node", opt->node, "only the ranks this node ran in the launch");
  cmd->add_option("--tail", opt->tail, "each file's last N lines first (default 0: all)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--since", opt->since,
                  "only lines written since: a duration back (90s, 10m, 2h, 1d) or a time "
                  "(2026-12-07T16:05:00Z, or 2026-12-07 16:05 in local time)");
  cmd->add_flag("--timestamps", opt->timestamps,
                "open each line with the UTC time it was written (to the second)");
  cmd->add_flag("--batch", opt->batch,
                "the attempt's batch script output (Slurm's slurm-<job>.out) instead");
  cmd->add_flag("--json", opt->json,
                "one JSON object per chunk and line: {\"rank\": R, \"data\": TEXT} (rank -1: the "
                "batch script)");
  cmd->callback([&global, exit_code, opt] { *exit_code = RunLogs(global, *opt); });
}

}  // namespace trellis::cli
