// trellis retry RUN [--fresh] [KEY=VALUE ...]
// trellis fork RUN --step N|latest [--with-optimizer] [KEY=VALUE ...]
// A new run from a stored run's spec. A [model] run's retry continues from
// the run's newest checkpoint exactly (training.init_state = "all"); a fork
// starts at step 0 from the weights of step N (training.init_from), with the
// values given over the spec (docs/architecture.md, "Retries and forks").

#include <iostream>
#include <memory>

#include "cli/commands/commands.h"
#include "cli/exit_status.h"
#include "cli/format.h"
#include "common/spec/run_spec.h"

namespace trellis::cli {

namespace {

struct RetryForkOptions {
  std::string run;
  std::vector<std::string> overrides;
  std::string name;
  bool fresh = false;           // retry: from step 0, not the run's newest checkpoint
  std::string step;             // fork: a step number or "latest"
  bool with_optimizer = false;  // fork: the optimizer's state too
  bool dry_run = false;
  bool json = false;
};

// The run's stored spec and whether it is a [model] run; an exit code when it
// cannot be had.
struct StoredSpec {
  std::string toml;
  bool model = false;
};
int ReadStoredSpec(const GlobalOptions& global, const std::string& run, StoredSpec* out) {
  ControllerClient client(global);
  v1::GetRunRequest req;
  req.set_run_id(run);
  v1::Run stored;
  auto ctx = client.UnaryContext();
  grpc::Status status = client.stub().GetRun(ctx.get(), req, &stored);
  if (!status.ok()) return client.Fail(status);
  out->toml = stored.spec_toml();
  spec::FieldErrors errors;
  auto parsed = spec::ParseRunSpec(out->toml, &errors);
  out->model = parsed && parsed->has_model;
  return kExitOk;
}

std::string Header(const std::string& verb, const RetryForkOptions& o,
                   const std::vector<std::string>& sets) {
  std::string h = "# trellis " + verb + " " + o.run;
  for (const std::string& s : sets) h += " " + s;
  return h;
}

int RunRetry(const GlobalOptions& global, const RetryForkOptions& o) {
  StoredSpec stored;
  if (int rc = ReadStoredSpec(global, o.run, &stored); rc != kExitOk) return rc;
  std::vector<std::string> sets;
  if (stored.model && !o.fresh)
    sets = {"training.init_from=" + o.run + "@latest", "training.init_state=all"};
  else if (stored.model)  // fresh weights, even where RUN was itself a fork
    sets = {"training.init_from=", "training.init_state=weights"};
  else if (!o.fresh)
    std::cerr << "trellis: " << o.run << " is a generic run: its program resumes from its own "
              << "files, if it keeps any; the retry runs the same spec\n";
  sets.insert(sets.end(), o.overrides.begin(), o.overrides.end());
  if (!o.name.empty()) sets.push_back("job.name=" + o.name);
  return SubmitSpecText(global, stored.toml, sets, Header("retry", o, sets), o.dry_run, o.json,
                        [&o](const std::string& refusal) {
                          return RetryRefusalHint(o.run, refusal);
                        });
}

int RunFork(const GlobalOptions& global, const RetryForkOptions& o) {
  StoredSpec stored;
  if (int rc = ReadStoredSpec(global, o.run, &stored); rc != kExitOk) return rc;
  if (!stored.model) {
    PrintError("fork: " + o.run + " is a generic run; fork starts a [model] run from another's "
               "checkpoint (a generic program resumes from its own files)");
    return kExitUsage;
  }
  std::vector<std::string> sets = {
      "training.init_from=" + o.run + "@" + o.step,
      std::string("training.init_state=") + (o.with_optimizer ? "weights_optimizer" : "weights")};
  sets.insert(sets.end(), o.overrides.begin(), o.overrides.end());
  if (!o.name.empty()) sets.push_back("job.name=" + o.name);
  return SubmitSpecText(global, stored.toml, sets, Header("fork", o, sets), o.dry_run, o.json);
}

void AddCommon(CLI::App* cmd, RetryForkOptions* o) {
  cmd->add_option("RUN", o->run, "the run whose spec is used")->required();
  cmd->add_option("KEY=VALUE", o->overrides,
                  "values over the run's spec, as `trellis submit` takes them");
  cmd->add_option("--name", o->name, "the new run's name (job.name)");
  cmd->add_flag("--dry-run", o->dry_run, "print what would be submitted; store nothing");
  cmd->add_flag("--json", o->json, "print JSON as `trellis submit --json` does");
}

}  // namespace

void AddRetryForkCommands(CLI::App& app, const GlobalOptions& global, int* exit_code) {
  auto retry = std::make_shared<RetryForkOptions>();
  CLI::App* r = app.add_subcommand(
      "retry",
      "A new run from RUN's spec (a FAILED one, or one to extend); a [model] run continues from "
      "RUN's newest checkpoint exactly (training.init_from = \"RUN@latest\", init_state = "
      "\"all\"), unless --fresh. Prints the new run id.\n"
      "Example: trellis retry tiny-moe-3 training.steps=600   # go on to step 600");
  AddCommon(r, retry.get());
  r->add_flag("--fresh", retry->fresh, "start from step 0 with fresh weights");
  r->callback([&global, exit_code, retry] { *exit_code = RunRetry(global, *retry); });

  auto fork = std::make_shared<RetryForkOptions>();
  CLI::App* f = app.add_subcommand(
      "fork",
      "A new [model] run from RUN's spec that starts at step 0 from the weights of RUN's "
      "checkpoint at --step (training.init_from = \"RUN@STEP\"), with values over the spec: an "
      "ablation, a branch. Prints the new run id.\n"
      "Example: trellis fork tiny-moe-3 --step 100 training.lr=1e-3 --name tiny-lr");
  AddCommon(f, fork.get());
  f->add_option("--step", fork->step, "a step of RUN with a complete checkpoint, or latest")
      ->required();
  f->add_flag("--with-optimizer", fork->with_optimizer,
              "take the optimizer's state too (training.init_state = \"weights_optimizer\")");
  f->callback([&global, exit_code, fork] { *exit_code = RunFork(global, *fork); });
}

}  // namespace trellis::cli
