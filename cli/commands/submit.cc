// trellis submit FILE [KEY=VALUE ...] [--name NAME] [--dry-run] [--json]

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands/commands.h"
#include "cli/exit_status.h"
#include "cli/format.h"
#include "cli/format_nodes.h"
#include "common/spec/run_spec.h"
#include "common/spec/spec_overrides.h"

namespace trellis::cli {

namespace {

struct SubmitOptions {
  std::string file;
  std::vector<std::string> overrides;  // KEY=VALUE, over the file's values
  std::string name;                    // job.name, over the file's
  bool dry_run = false;
  bool json = false;
};

std::string TooLarge(uint64_t size) {
  return "spec: is " + std::to_string(size) + " bytes; the limit is " +
         std::to_string(spec::kMaxSpecBytes);
}

}  // namespace

// Reads the spec ("-": standard input), refusing what the controller would
// refuse for its size without holding more than the limit in memory.
std::optional<std::string> ReadSpecFile(const std::string& path, std::string* error) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) {
      *error = "cannot read spec file '" + path + "': " + std::strerror(errno);
      return std::nullopt;
    }
    in = &file;
  }
  std::string text;
  uint64_t total = 0;
  char buf[64 * 1024];
  while (in->read(buf, sizeof(buf)) || in->gcount() > 0) {
    auto n = static_cast<size_t>(in->gcount());
    total += n;
    if (total <= spec::kMaxSpecBytes) text.append(buf, n);
  }
  if (in->bad()) {
    *error = "cannot read spec file '" + path + "': " + std::strerror(errno);
    return std::nullopt;
  }
  if (total > spec::kMaxSpecBytes) {
    *error = TooLarge(total);
    return std::nullopt;
  }
  return text;
}


void PrintDryRun(const v1::SubmitRunResponse& resp) {
  if (!resp.resolved_spec().empty())
    std::cout << "--- spec, every key with its default ---\n" << resp.resolved_spec();
  std::cout << "--- batch script ---\n" << resp.batch_script();
  if (!resp.batch_script().empty() && resp.batch_script().back() != '\n') std::cout << "\n";
  std::cout << "--- sbatch arguments (one per line) ---\n";
  for (const auto& arg : resp.sbatch_args()) std::cout << arg << "\n";
  if (resp.pool_sbatch_args_size() > 0) {
    std::cout << "--- spare pool job's sbatch arguments, once the run trains (one per line) ---\n";
    for (const auto& arg : resp.pool_sbatch_args()) std::cout << arg << "\n";
  }
  std::cout << "--- launch gate (each node's sockets) ---\n"
            << RenderGatePolicy(resp.gate_policy_json());
}

namespace {

int RunSubmit(const GlobalOptions& global, const SubmitOptions& opt) {
  std::string error;
  std::optional<std::string> text = ReadSpecFile(opt.file, &error);
  if (!text) {
    PrintError(error);
    return kExitUsage;
  }
  std::vector<std::string> overrides = opt.overrides;
  if (!opt.name.empty()) overrides.push_back("job.name=" + opt.name);
  std::string header = "# " + opt.file;
  for (const std::string& o : opt.overrides) header += " " + o;
  if (!opt.name.empty()) header += " --name " + opt.name;
  return SubmitSpecText(global, *text, overrides, header, opt.dry_run, opt.json);
}

}  // namespace

int SubmitSpecText(const GlobalOptions& global, std::string text,
                   const std::vector<std::string>& overrides, const std::string& header,
                   bool dry_run, bool json,
                   const std::function<std::string(const std::string&)>& hint) {
  if (!overrides.empty()) {
    // The spec as given, then the command line's values over it (the spec
    // stored and shown is the result).
    spec::FieldErrors errors;
    std::optional<std::string> applied = spec::ApplyOverrides(text, overrides, &errors);
    if (!applied) {
      PrintError(spec::JoinErrors(errors));
      return kExitUsage;
    }
    text = header + "\n" + *applied;
  }
  ControllerClient client(global);
  v1::SubmitRunRequest req;
  req.set_spec_toml(std::move(text));
  req.set_dry_run(dry_run);
  v1::SubmitRunResponse resp;
  auto ctx = client.UnaryContext();
  grpc::Status status = client.stub().SubmitRun(ctx.get(), req, &resp);
  if (!status.ok()) {
    const int rc = client.Fail(status);
    if (const std::string more = hint ? hint(status.error_message()) : ""; !more.empty())
      PrintError(more);
    return rc;
  }
  if (json) {
    std::cout << SubmitToJson(resp, dry_run).dump(2) << "\n";
  } else if (dry_run) {
    PrintDryRun(resp);
  } else {
    std::cout << resp.run_id() << "\n";
  }
  return kExitOk;
}

void AddSubmitCommand(CLI::App& app, const GlobalOptions& global, int* exit_code) {
  auto opt = std::make_shared<SubmitOptions>();
  CLI::App* cmd = app.add_subcommand(
      "submit",
      "Validate and submit a run spec; prints the run id (alone, for scripts).\n"
      "Example: trellis submit examples/hello.toml slurm.nodes=1 --name hello-one --dry-run");
  cmd->add_option("FILE", opt->file, "the run spec (TOML, at most 1 MiB; '-' reads stdin)")
      ->required();
  cmd->add_option("KEY=VALUE", opt->overrides,
                  "values over the file's: a dotted key and a TOML value, a bare word being a "
                  "string (slurm.nodes=1 training.lr=1e-3 env.NCCL_DEBUG=INFO "
                  "job.command='python3 train.py')");
  cmd->add_option("--name", opt->name, "the run's name (job.name), over the file's");
  cmd->add_flag("--dry-run", opt->dry_run,
                "validate and print the spec with every default, the batch script and sbatch "
                "arguments; store nothing");
  cmd->add_flag("--json", opt->json,
                "print JSON: {\"run_id\"}, or with --dry-run {\"resolved_spec\", "
                "\"batch_script\", \"sbatch_args\", \"gate_policy\"[, \"pool_sbatch_args\"]}");
  cmd->callback([&global, exit_code, opt] { *exit_code = RunSubmit(global, *opt); });
}

}  // namespace trellis::cli
