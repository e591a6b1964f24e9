#pragma once
// Where the paths of a run spec may point (docs/architecture.md, "Access").
// The ranks run as the controller's owner, whoever submitted the run, so a
// corpus (`training.data`) must lie under a data root the owner configured
// (--data-root; by default the owner's home directory and the output root),
// and a run's directory (`job.output_dir`) under the output root. Paths are
// compared after resolving "..", "." and symlinks, so neither a link nor a
// "../" leads out of a root.

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/spec/run_spec.h"

namespace trellis::controller {

// Pure: `path` is `root` or lies below it, compared by whole components
// (/data2 is not under /data). Both absolute and already resolved.
bool IsUnderRoot(const std::filesystem::path& path, const std::filesystem::path& root);

// The roots used when none are configured: the home directory of the user
// the controller runs as (its passwd entry, else $HOME), and `output_root`.
std::vector<std::string> DefaultDataRoots(const std::string& output_root);

// Configured roots must be absolute: the error names --data-root and the value.
absl::Status CheckDataRoots(const std::vector<std::string>& roots);

// A [model] run's training.data as the ranks will open it: an absolute path
// as given; a relative one found under the first data root that has it
// (`licenses.corpus` -> /srv/corpora/licenses.corpus), so that a spec names
// its corpus without knowing where a site keeps corpora. INVALID_ARGUMENT
// naming the places looked in when none has it.
absl::StatusOr<std::string> ResolveTrainingData(const std::string& path,
                                                const std::vector<std::string>& data_roots);

// INVALID_ARGUMENT naming the field, the path and the accepted roots (and
// where a link out of a root leads) for the first path of `spec` out of
// bounds: a [model] run's training.data (absolute, under a data root, a
// readable file) and job.output_dir (under `output_root`).
absl::Status CheckSpecPaths(const spec::RunSpec& spec, const std::vector<std::string>& data_roots,
                            const std::string& output_root);

}  // namespace trellis::controller
