#include "controller/app/init_from_link.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/checkpoint_layout.h"
#include "common/log.h"
#include "common/spec/spec_overrides.h"

namespace trellis::controller {

namespace fs = std::filesystem;

namespace {

// Links `from` (a step directory's tree) into `to`, the manifest of each
// directory last; the first failure's file and reason.
absl::Status LinkStepTree(const fs::path& from, const fs::path& to) {
  std::error_code ec, kind;
  fs::create_directories(to, ec);
  if (ec) return absl::InternalError("cannot create " + to.string() + ": " + ec.message());
  bool has_manifest = false;
  for (const fs::directory_entry& e : fs::directory_iterator(from, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory(kind)) {
      if (absl::Status st = LinkStepTree(e.path(), to / name); !st.ok()) return st;
    } else if (name == "manifest.json") {
      has_manifest = true;
    } else if (::link(e.path().c_str(), (to / name).c_str()) != 0) {
      return absl::InternalError("cannot link " + e.path().string() + ": " + std::strerror(errno));
    }
  }
  if (ec) return absl::InternalError("cannot list " + from.string() + ": " + ec.message());
  if (has_manifest &&
      ::link((from / "manifest.json").c_str(), (to / "manifest.json").c_str()) != 0)
    return absl::InternalError("cannot link " + (from / "manifest.json").string() + ": " +
                               std::strerror(errno));
  return absl::OkStatus();
}

}  // namespace

std::string InitFromCopyDir(const std::string& run_dir, const std::string& source_run) {
  return run_dir + "/init-from/" + source_run + "/checkpoints";
}

absl::Status LinkCheckpointStep(const std::string& from_dir, int64_t step,
                                const std::string& to_dir) {
  const fs::path from = CheckpointStepDir(from_dir, step);
  const fs::path to = CheckpointStepDir(to_dir, step);
  std::error_code ec;
  fs::remove_all(to, ec);  // a half-made copy of an earlier try
  absl::Status st = LinkStepTree(from, to);
  if (!st.ok()) fs::remove_all(to, ec);
  return st;
}

RunRecord KeepInitFromStep(Store& store, const RunRecord& run, const InitFromFound& source,
                           WallTime now) {
  const std::string copy = InitFromCopyDir(run.run_dir, source.run);
  const std::string step = std::to_string(source.step);
  absl::Status linked = LinkCheckpointStep(source.dir, source.step, copy);
  std::optional<std::string> spec;
  std::string note;
  if (linked.ok()) {
    const std::string value = copy + "@" + step;
    spec::FieldErrors errors;
    spec = spec::ApplyOverridesKeepingOpening(
        run.spec_toml, {"training.init_from=" + value},
        "# training.init_from: step " + step + " of " + source.run + " linked into " + copy + "\n",
        &errors);
    if (!spec) linked = absl::InternalError(spec::JoinErrors(errors));
    note = "training.init_from: step " + step + " of " + source.run + " linked into the run's "
           "directory, kept should " + source.run + " prune it";
  }
  if (!linked.ok()) {
    spec.reset();
    note = "training.init_from: step " + step + " of " + source.run + " could not be linked into "
           "the run's directory (" + std::string(linked.message()) + "); the run reads it in " +
           source.dir + ", not protected from the source's pruning";
  }
  if (absl::Status st = store.NoteOnRun(run.run_id, note, now, spec); !st.ok()) {
    spdlog::warn("run {}: cannot store where it starts from ({}): {}", run.run_id, note,
                 std::string(st.message()));
    return run;
  }
  spdlog::info("run {}: {}", run.run_id, note);
  auto stored = store.GetRun(run.run_id);
  return stored.ok() ? *stored : run;
}

}  // namespace trellis::controller
