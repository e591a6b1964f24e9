#pragma once
// The sentences of `trellis doctor` and `trellis-controller --check`
// (docs/architecture.md, "Doctor"), from what the commands answered: each
// check one line, ok or what is wrong and what to do. Pure: the commands are
// run by controller/slurm/doctor.h.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/check_line.h"
#include "common/subprocess.h"
#include "controller/core/slurm_facts.h"

namespace trellis::controller {

// The Slurm commands Trellis runs, and those it may.
inline constexpr const char* kSlurmCommandsNeeded[] = {"sbatch", "squeue", "scontrol",
                                                       "sinfo",  "srun",   "scancel"};

// `missing`: of kSlurmCommandsNeeded; `where`: the directory or "PATH";
// `version`: `sinfo --version`'s answer.
CheckLine SlurmCommandsLine(const std::vector<std::string>& missing, const std::string& where,
                            const std::string& version);
// `scontrol ping`.
CheckLine SlurmctldLine(const CommandResult& ping);
// `munge -n | unmunge` (through `socket` when not empty).
CheckLine MungeLine(const CommandResult& roundtrip, const std::string& socket);
// AuthType and AuthInfo's socket= from `scontrol show config`.
struct AuthConfig {
  std::string type;    // "auth/munge", ...
  std::string socket;  // AuthInfo socket=..., or empty
};
AuthConfig ParseAuthConfig(std::string_view show_config);

// `sinfo -h -o "%P|%a|%D|%G"`: partition (default marked '*'), availability,
// nodes, GRES.
struct PartitionSeen {
  std::string name;
  bool is_default = false;
  bool up = false;
  int nodes = 0;
  int gpus_per_node = 0;  // from gres "gpu:N" or "gpu:TYPE:N"
};
std::vector<PartitionSeen> ParsePartitions(std::string_view sinfo_out);
// sinfo did not answer: the partitions cannot be read.
CheckLine SinfoFailedLine(const CommandResult& sinfo);
// The partition asked for ("" = Slurm's default): found and up, or what is
// wrong. `chosen` gets the partition's entry when there is one.
CheckLine PartitionLine(const std::string& wanted, const std::vector<PartitionSeen>& seen,
                        std::optional<PartitionSeen>* chosen);
// The account asked for ("" = the user's default) against the user's
// associations; without accounting, skipped.
CheckLine AccountLine(const std::string& wanted,
                      const absl::StatusOr<std::vector<SlurmAssociation>>& associations,
                      bool accounting);

// The lines of `trellis-worker check` run by srun on one node (its stdout:
// "node=NAME" then one JSON check line each), named "node NAME: CHECK"; or,
// when the srun did not run it, why and what to do. A worker whose version
// differs from `controller_version` fails its "worker" line.
std::vector<CheckLine> NodeLines(const CommandResult& srun, const std::string& worker_bin,
                                 const std::string& partition,
                                 const std::string& controller_version);

}  // namespace trellis::controller
