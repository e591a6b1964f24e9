#pragma once
// Runs the site checks of `trellis doctor` and `trellis-controller --check`
// (docs/architecture.md, "Doctor"): the Slurm commands, slurmctld, munge, the
// partition and account, and one compute node reached by a short srun that
// runs `trellis-worker check` there. The sentences are
// controller/core/doctor_rules.h's; this file only runs the commands.

#include <string>
#include <vector>

#include "common/check_line.h"

namespace trellis::controller {

struct DoctorInputs {
  std::string slurm_bin_dir;  // empty: PATH
  int slurm_timeout_s = 30;   // one Slurm command
  std::string partition;      // empty: Slurm's default
  std::string account;        // empty: none named
  std::string worker_bin;     // absolute, as the compute nodes see it
  // What the node dials; empty: no controller serves (the node skips it).
  std::string controller_addr;
  std::string controller_file;
  std::string tls_ca;
  std::vector<std::string> node_paths;  // must be visible from a compute node
  int expect_gpus = -1;                 // -1: what the partition's GRES says
  int node_timeout_s = 120;             // the srun, queue wait included
  std::string version;                  // this controller's
};

std::vector<CheckLine> RunDoctor(const DoctorInputs& in);

}  // namespace trellis::controller
