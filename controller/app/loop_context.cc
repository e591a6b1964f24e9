#include "controller/app/loop_context.h"

#include "common/log.h"

namespace trellis::controller {

absl::StatusOr<spec::RunSpec> LoopContext::ParseStoredSpec(const RunRecord& run) const {
  spec::FieldErrors errors;
  auto spec = spec::ParseRunSpec(run.spec_toml, &errors);
  if (!spec) return absl::DataLossError("stored spec of " + run.run_id + ": " + JoinErrors(errors));
  if (spec->slurm.partition.empty()) spec->slurm.partition = config.default_partition;
  return *spec;
}

std::string LoopContext::RunDirFor(const spec::RunSpec& spec, const std::string& run_id) const {
  std::string base = config.output_root;
  if (!spec.job.output_dir.empty()) base += "/" + spec.job.output_dir;
  return base + "/" + run_id;
}

std::vector<std::string> LoopContext::ExcludedNow() const {
  auto entries = store.QuarantineEntries();
  if (!entries.ok()) {
    spdlog::error("quarantine list unreadable: {}", std::string(entries.status().message()));
    return {};
  }
  return ExcludedNodes(*entries, clock.Now(), config.quarantine);
}

}  // namespace trellis::controller
