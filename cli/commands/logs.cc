// trellis logs ID [--rank R] [--follow] [--attempt A]

#include <iostream>
#include <memory>

#include "cli/commands/commands.h"
#include "cli/exit_status.h"

namespace trellis::cli {

namespace {

struct LogsOptions {
  std::string run_id;
  int rank = -1;
  bool follow = false;
  int attempt = 0;
};

int RunLogs(const GlobalOptions& global, const LogsOptions& opt) {
  ControllerClient client(global);
  v1::ReadLogsRequest req;
  req.set_run_id(opt.run_id);
  req.set_rank(opt.rank);
  req.set_follow(opt.follow);
  req.set_attempt(opt.attempt);
  auto ctx = client.StreamContext();
  auto reader = client.stub().ReadLogs(ctx.get(), req);
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) {
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
  CLI::App* cmd = app.add_subcommand("logs", "Print the ranks' output of a run's latest launch");
  cmd->add_option("ID", opt->run_id, "the run id")->required();
  cmd->add_option("--rank", opt->rank, "one rank's output (default -1: every rank, prefixed)")
      ->check(CLI::Range(-1, 1 << 24));
  cmd->add_flag("--follow,-f", opt->follow, "keep printing new output until the run ends");
  cmd->add_option("--attempt", opt->attempt, "attempt number (default 0: the latest)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([&global, exit_code, opt] { *exit_code = RunLogs(global, *opt); });
}

}  // namespace trellis::cli
