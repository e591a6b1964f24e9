#include "controller/slurm/doctor.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/subprocess.h"
#include "controller/core/doctor_rules.h"
#include "controller/slurm/slurm_cli_client.h"

namespace trellis::controller {
namespace {

using V = CheckLine::Verdict;

// The command's path: in `bin_dir`, else on PATH; empty when not found.
std::string FindCommand(const std::string& bin_dir, const std::string& name) {
  if (!bin_dir.empty()) {
    std::string p = bin_dir + "/" + name;
    return access(p.c_str(), X_OK) == 0 ? p : "";
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');) {
    std::string p = (d.empty() ? "." : d) + "/" + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

CommandResult Ran(const std::vector<std::string>& argv, int timeout_s) {
  CommandOptions o;
  o.timeout = std::chrono::seconds(timeout_s);
  auto r = RunCommand(argv, o);
  if (r.ok()) return *r;
  return {127, "", std::string(r.status().message()), false};
}

// `trellis-worker check` on one node of the partition, its node's name first.
CommandResult NodeCheck(const DoctorInputs& in, const std::string& srun, int gpus) {
  std::vector<std::string> argv = {srun, "--nodes=1", "--ntasks=1", "--time=5",
                                   "--job-name=trellis-doctor", "--quiet"};
  if (!in.partition.empty()) argv.push_back("--partition=" + in.partition);
  if (!in.account.empty()) argv.push_back("--account=" + in.account);
  if (gpus > 0) argv.push_back("--gpus-per-node=" + std::to_string(gpus));
  // The node's Slurm name before the worker's lines: a worker that cannot be
  // run is then still told apart from an srun that ran nowhere.
  argv.insert(argv.end(), {"/bin/sh", "-c", "echo \"node=${SLURMD_NODENAME:-?}\"; exec \"$@\"",
                           "sh", in.worker_bin, "check"});
  if (!in.controller_addr.empty()) argv.insert(argv.end(), {"--controller", in.controller_addr});
  if (!in.controller_file.empty())
    argv.insert(argv.end(), {"--controller-file", in.controller_file});
  if (!in.tls_ca.empty()) argv.insert(argv.end(), {"--tls-ca", in.tls_ca});
  for (const auto& p : in.node_paths) argv.insert(argv.end(), {"--path", p});
  argv.insert(argv.end(), {"--expect-gpus", std::to_string(std::max(gpus, 0))});
  return Ran(argv, in.node_timeout_s);
}

}  // namespace

std::vector<CheckLine> RunDoctor(const DoctorInputs& in) {
  std::vector<CheckLine> lines;
  std::vector<std::string> missing;
  for (const char* c : kSlurmCommandsNeeded)
    if (FindCommand(in.slurm_bin_dir, c).empty()) missing.push_back(c);
  const std::string where = in.slurm_bin_dir.empty() ? "PATH" : in.slurm_bin_dir;
  std::string version;
  if (missing.empty()) {
    CommandResult v = Ran({FindCommand(in.slurm_bin_dir, "sinfo"), "--version"}, 10);
    version = v.exit_code == 0 ? v.out.substr(0, v.out.find('\n')) : "";
  }
  lines.push_back(SlurmCommandsLine(missing, where, version));
  if (!missing.empty()) {
    lines.push_back({"slurm", V::kSkip, "the other checks need Slurm's commands"});
    return lines;
  }
  auto bin = [&](const char* name) { return FindCommand(in.slurm_bin_dir, name); };
  const int t = in.slurm_timeout_s;
  lines.push_back(SlurmctldLine(Ran({bin("scontrol"), "ping"}, t)));

  // slurm.conf itself when slurmctld does not answer (munge down, say):
  // munge is Slurm's default.
  CommandResult config = Ran({bin("scontrol"), "show", "config"}, t);
  AuthConfig auth = ParseAuthConfig(config.out);
  if (config.exit_code != 0 || auth.type.empty()) {
    const char* conf = std::getenv("SLURM_CONF");
    std::ifstream in(conf != nullptr && *conf != '\0' ? conf : "/etc/slurm/slurm.conf");
    std::stringstream text;
    text << in.rdbuf();
    auth = ParseAuthConfig(text.str());
    if (auth.type.empty()) auth.type = "auth/munge";
  }
  if (auth.type.find("munge") == std::string::npos) {
    lines.push_back({"munge", V::kSkip,
                     "Slurm authenticates with " + (auth.type.empty() ? "?" : auth.type)});
  } else if (FindCommand("", "munge").empty() || FindCommand("", "unmunge").empty()) {
    lines.push_back({"munge", V::kFail,
                     "Slurm uses munge but munge/unmunge are not on PATH: install munge"});
  } else {
    // munge's own error when it cannot encode, not unmunge's about no input.
    std::string sock = auth.socket.empty() ? "" : " -S '" + auth.socket + "'";
    lines.push_back(MungeLine(
        Ran({"/bin/sh", "-c",
             "c=$(munge -n" + sock + ") || exit 1; printf '%s' \"$c\" | unmunge" + sock +
                 " >/dev/null"},
            t),
        auth.socket));
  }

  CommandResult sinfo = Ran({bin("sinfo"), "-h", "-o", "%P|%a|%D|%G"}, t);
  std::optional<PartitionSeen> partition;
  if (sinfo.exit_code != 0) {
    lines.push_back(SinfoFailedLine(sinfo));
  } else {
    lines.push_back(PartitionLine(in.partition, ParsePartitions(sinfo.out), &partition));
  }
  SlurmCliOptions slurm{in.slurm_bin_dir, std::chrono::seconds(t), false};
  slurm.accounting = SlurmCliClient::DetectAccounting(slurm);
  lines.push_back(AccountLine(in.account, SlurmCliClient(slurm).ListAssociations(),
                              slurm.accounting));

  if (!partition) {
    lines.push_back({"node", V::kSkip, "no partition to run on"});
    return lines;
  }
  const int gpus = in.expect_gpus >= 0 ? in.expect_gpus : partition->gpus_per_node;
  for (CheckLine& l : NodeLines(NodeCheck(in, bin("srun"), gpus), in.worker_bin,
                                in.partition, in.version))
    lines.push_back(std::move(l));
  return lines;
}

}  // namespace trellis::controller
