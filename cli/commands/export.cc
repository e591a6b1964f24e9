// trellis export RUN[@STEP] OUT/ [--dtype float32|bfloat16] [--max-file-size 5GB]
// A run's trained model as safetensors under Hugging Face Mixtral's (or, with
// a shared expert, Qwen2-MoE's) names: the controller says where RUN's
// checkpoints and spec are; trellis-export (installed beside trellis; it
// holds LibTorch, the CLI does not) gathers and writes them. Runs where the
// run directory is visible.

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/commands/commands.h"
#include "cli/exit_status.h"
#include "common/checkpoint_layout.h"
#include "common/spec/run_spec.h"

extern char** environ;

namespace trellis::cli {

namespace {

struct ExportOptions {
  std::string source;  // RUN[@STEP]
  std::string out;
  std::string dtype = "float32";
  std::string max_file_size = "5GB";
  bool json = false;
};

// trellis-export beside this binary (an install or a build puts them
// together), else the first on PATH.
std::string ExportBinary() {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, n);
    dir = dir.substr(0, dir.rfind('/'));
    if (::access((dir + "/trellis-export").c_str(), X_OK) == 0) return dir + "/trellis-export";
  }
  return "trellis-export";
}

int Spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args)
    if (!a.empty()) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
    PrintError("export: cannot run " + args[0] + " (install trellis-export beside trellis, or "
               "put it on PATH)");
    return kExitRunFailed;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : kExitRunFailed;
}

int RunExport(const GlobalOptions& global, const ExportOptions& o) {
  const size_t at = o.source.rfind('@');
  const std::string run_id = o.source.substr(0, at);
  const std::string step = at == std::string::npos ? "latest" : o.source.substr(at + 1);
  ControllerClient client(global);
  v1::GetRunRequest req;
  req.set_run_id(run_id);
  v1::Run run;
  auto ctx = client.UnaryContext();
  grpc::Status status = client.stub().GetRun(ctx.get(), req, &run);
  if (!status.ok()) return client.Fail(status);
  spec::FieldErrors errors;
  auto parsed = spec::ParseRunSpec(run.spec_toml(), &errors);
  if (!parsed || !parsed->has_model) {
    PrintError("export: " + run_id + " is a generic run: its program keeps its own files; "
               "export takes a [model] run's checkpoints");
    return kExitUsage;
  }
  const std::string checkpoints = run.run_dir() + "/checkpoints";
  if (::access(run.run_dir().c_str(), R_OK | X_OK) != 0) {
    PrintError("export: " + run_id + "'s directory " + run.run_dir() + " cannot be read from "
               "here; run trellis export where the controller's output root is mounted");
    return kExitRunFailed;
  }
  if (CompleteCheckpoints(checkpoints).empty()) {
    PrintError("export: " + run_id + " has no complete checkpoint yet (in " + checkpoints + ")");
    return kExitNotFound;
  }
  // The stored spec (what the run was given) beside nothing of the run's:
  // the run directory's copy may be the controller's alone to read.
  const char* tmp = std::getenv("TMPDIR");
  std::string spec_path = std::string(tmp && *tmp ? tmp : "/tmp") + "/trellis-export-spec-XXXXXX";
  const int fd = ::mkstemp(spec_path.data());
  if (fd < 0) {
    PrintError("export: cannot create a temporary file as " + spec_path + " (set TMPDIR)");
    return kExitRunFailed;
  }
  ::close(fd);
  std::ofstream(spec_path) << run.spec_toml();
  const std::string step_label = step == "latest" ? "the newest step" : "step " + step;
  const int rc = Spawn({ExportBinary(), checkpoints + "@" + step, o.out, "--spec", spec_path,
                        "--dtype", o.dtype, "--max-file-size", o.max_file_size, "--source-name",
                        "run " + run_id + " (" + step_label + ")", o.json ? "--json" : ""});
  ::unlink(spec_path.c_str());
  return rc == 0 ? kExitOk : kExitRunFailed;
}

}  // namespace

void AddExportCommand(CLI::App& app, const GlobalOptions& global, int* exit_code) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Write RUN's trained model (its newest checkpoint, or @STEP's) into OUT/ as safetensors "
      "files under Hugging Face Mixtral's names (Qwen2-MoE's for a shared expert), with "
      "model.safetensors.index.json and config.json, for Hugging Face-style tools. OUT/ must "
      "be new or empty.\n"
      "Example: trellis export tiny-moe-3@200 ./tiny-moe-3-step200 --dtype bfloat16");
  cmd->add_option("RUN[@STEP]", o->source, "the run, and a step with a complete checkpoint")
      ->required();
  cmd->add_option("OUT", o->out, "the export's directory (new or empty)")->required();
  cmd->add_option("--dtype", o->dtype, "the weights' dtype (default float32, as trained)")
      ->check(CLI::IsMember({"float32", "bfloat16"}));
  cmd->add_option("--max-file-size", o->max_file_size,
                  "the largest safetensors file (default 5GB, as Hugging Face's)");
  cmd->add_flag("--json", o->json, "print what was written as JSON");
  cmd->callback([&global, exit_code, o] { *exit_code = RunExport(global, *o); });
}

}  // namespace trellis::cli
