// trellis-train SPEC.toml [--set KEY=VALUE ...] [--steps N] [--json] [--data PATH]
//                         [--checkpoint-dir DIR] [--resume latest|STEP]
// The trainer as a standalone binary. --steps stops early at step N; the
// learning-rate schedule always spans training.steps, so a run stopped and
// resumed follows the same curve as one that never stopped.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/spec/spec_overrides.h"
#include "common/spec/trainer_spec.h"
#include "trainer_core/error.h"
#include "trainer_core/parallel/comm.h"
#include "trainer_core/parallel/nccl_log_file.h"
#include "trainer_core/profile/kernel_profile.h"
#include "trainer_core/stop_signal.h"
#include "trainer_core/trainer.h"

namespace {

using trellis::StepRecord;

// The spec file with --set's values over it.
std::optional<trellis::spec::TrainerSpec> LoadSpec(const std::string& path,
                                                   const std::vector<std::string>& sets) {
  std::ifstream file(path);
  if (!file) {
    std::cerr << "trellis-train: cannot read " << path << "\n";
    return std::nullopt;
  }
  std::stringstream text;
  text << file.rdbuf();
  trellis::spec::FieldErrors errors;
  std::optional<std::string> applied = trellis::spec::ApplyOverrides(text.str(), sets, &errors);
  if (!applied) {
    std::cerr << "trellis-train: --set: " << trellis::spec::JoinErrors(errors) << "\n";
    return std::nullopt;
  }
  toml::table root;
  try {
    root = toml::parse(*applied, std::string_view(path));
  } catch (const toml::parse_error& e) {
    std::cerr << "trellis-train: " << path << ": TOML syntax error at line "
              << e.source().begin.line << ": " << e.description() << "\n";
    return std::nullopt;
  }
  auto spec = trellis::spec::ParseTrainerSections(root, &errors);
  if (!errors.empty()) {
    std::cerr << "trellis-train: " << path << ": " << trellis::spec::JoinErrors(errors) << "\n";
    return std::nullopt;
  }
  return spec;
}

int64_t ParseResume(const std::string& text) {
  if (text.empty()) return trellis::train::kStartFresh;
  if (text == "latest") return trellis::train::kResumeLatest;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || v < 0) throw CLI::ValidationError("--resume", "must be latest or a step");
  return v;
}

void PrintHuman(const StepRecord& r) {
  std::printf("step %5ld  loss %.4f  grad_norm %.3f  %.0f tok/s  (fwd %.3fs bwd %.3fs opt %.3fs)\n",
              static_cast<long>(r.step), r.loss, r.grad_norm.value_or(0), r.tokens / r.step_seconds,
              r.fwd_seconds.value_or(0), r.bwd_seconds.value_or(0), r.optim_seconds.value_or(0));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trains the Trellis MoE model in one process"};
  std::string spec_path, data, checkpoint_dir, resume;
  int64_t steps = -1;
  bool json = false;
  std::vector<std::string> sets;
  app.add_option("spec", spec_path, "run spec (TOML)")->required();
  app.add_option("--set", sets,
                 "KEY=VALUE over the spec's value, as `trellis submit` takes them "
                 "(--set training.lr=1e-3 --set model.layers=4)");
  app.add_option("--steps", steps, "stop after step N (default: training.steps)");
  app.add_flag("--json", json, "one JSON step record per line on stdout");
  app.add_option("--data", data, "corpus file (overrides training.data)");
  app.add_option("--checkpoint-dir", checkpoint_dir, "checkpoint directory")
      ->envname("TRELLIS_CHECKPOINT_DIR");
  app.add_option("--resume", resume, "latest, or a step number")->envname("TRELLIS_RESUME_STEP");
  double mtbf_s = 0;
  app.add_option("--mtbf-s", mtbf_s,
                 "seconds between failures of the run's nodes, for checkpoint.every_steps = "
                 "\"auto\" (default: one per 5,000 node-hours)")
      ->envname("TRELLIS_MTBF_S")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  trellis::train::InstallStopSignal();  // SIGUSR1: stop at the next step, with a checkpoint
  auto spec = LoadSpec(spec_path, sets);
  if (!spec) return 2;
  if (!data.empty()) spec->training.data = data;
  try {
    // Several ranks when started with RANK / WORLD_SIZE / MASTER_ADDR /
    // MASTER_PORT (any launcher); world 1 otherwise.
    auto comm_options = trellis::train::CommOptionsFromEnv();
    trellis::train::ChooseRankDevice(spec->training, &comm_options);
    // NCCL's log to a file of the rank's (standard output carries --json's
    // records), before NCCL starts; its channel count goes in the records.
    // PyTorch's blocking wait off (nccl_log.h says why).
    trellis::train::NcclLogPlan nccl_log;
    std::string blocking_wait_note;
    if (trellis::train::MeetsOverNccl(comm_options)) {
      nccl_log = trellis::train::SetUpNcclLog(comm_options.rank, checkpoint_dir);
      blocking_wait_note = trellis::train::TurnOffNcclBlockingWait();
    }
    trellis::train::TrainerOptions options;
    options.connect = comm_options;  // met once the spec and any resume are checked
    if (const char* local = std::getenv("LOCAL_WORLD_SIZE"))
      options.local_world_size = std::atoi(local);
    options.checkpoint_dir = checkpoint_dir;
    options.resume_step = ParseResume(resume);
    options.mtbf_s = mtbf_s;
    std::shared_ptr<trellis::train::KernelProfile> profile =
        trellis::train::KernelProfile::FromEnv();
    options.on_step = [json, profile](const StepRecord& r) {
      if (profile) profile->AfterStep(r.step);
      if (!json) return PrintHuman(r);
      std::cout << trellis::EncodeStepRecord(r) << std::endl;  // a line per step, flushed
    };
    options.nccl_log = nccl_log.follow;
    options.stop_requested = trellis::train::StopSignalled;
    options.on_note = [](const std::string& line) {
      std::cerr << "trellis-train: " << line << std::endl;
    };
    trellis::train::Trainer trainer(*spec, std::move(options));
    std::cerr << "trellis-train: " << trainer.Describe() << "; starting at step " << trainer.step()
              << "\n";
    std::cerr << "trellis-train: " << trainer.DescribeDevice() << "\n";
    if (!nccl_log.note.empty()) std::cerr << "trellis-train: " << nccl_log.note << "\n";
    if (!blocking_wait_note.empty())
      std::cerr << "trellis-train: " << blocking_wait_note << "\n";
    if (trainer.Run(steps >= 0 ? steps : spec->training.steps))
      std::cerr << "trellis-train: stopped at step " << trainer.step()
                << " for SIGUSR1 (a wall-time warning)" << std::endl;
  } catch (const CLI::ValidationError& e) {
    std::cerr << "trellis-train: " << e.what() << "\n";
    return 2;
  } catch (const trellis::train::TrainError& e) {
    std::cerr << "trellis-train: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
