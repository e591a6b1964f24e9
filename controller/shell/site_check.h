#pragma once
// What the controller adds to the site checks (docs/architecture.md,
// "Doctor"): its store's filesystem and journal, who holds its state
// directory, and the inputs of controller/slurm/doctor.h from its flags and,
// for `trellis doctor SPEC`, from a spec. `trellis-controller --check` prints
// them all without serving.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/check_line.h"
#include "controller/shell/flags.h"
#include "controller/slurm/doctor.h"

namespace trellis::controller {

// The database's filesystem and journal (a WAL on a network filesystem
// fails), and the state directory writable.
CheckLine StoreLine(const ControllerFlags& flags);
// Who holds the state directory's lease (controller/shell/lease.h), as seen
// from `host`.
CheckLine LeaseLine(const std::string& state_dir, const std::string& host);

// The checks' inputs from the settled flags; with a spec (not empty), its
// partition, account, GPUs per node and paths (training.data found under a
// data root, training.init_from). `controller_addr`: what the node dials
// (empty: no controller serves). A corpus found in no data root is a line
// of `spec_lines`; a spec that does not parse, INVALID_ARGUMENT naming its
// fields.
absl::StatusOr<DoctorInputs> DoctorInputsFor(const ControllerFlags& flags,
                                             const std::string& spec_toml,
                                             const std::string& controller_addr,
                                             std::vector<CheckLine>* spec_lines);

// --check: every line on stdout; 0 when none failed, 1 otherwise.
int RunSiteCheck(const ControllerFlags& flags, const std::string& host);

}  // namespace trellis::controller
