#pragma once
// What a worker tells the controller about its node at Register.

#include <string>

#include "worker/core/rank_layout.h"

namespace trellis::worker {

// Entries /dev/nvidia<digits> under dev_dir (0 on CPU-only nodes).
int CountGpus(const std::string& dev_dir = "/dev");
// CPUs this process may run on (Slurm's binding), at least 1.
int CountCpus();
std::string Hostname();
// The node name: SLURMD_NODENAME when Slurm set it, else the host name.
std::string DefaultNodeName();
// The first executable `name` in the ':'-separated directories of path_env
// (as $PATH); empty when there is none.
std::string FindExecutable(const std::string& name, const std::string& path_env);
// The absolute path of this process's executable (/proc/self/exe).
std::string SelfExecutable();
// This process's environment as a map.
EnvMap CurrentEnvironment();

}  // namespace trellis::worker
