#include "controller/shell/site_check.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/controller_address.h"
#include "common/filesystem_kind.h"
#include "common/spec/field_errors.h"
#include "common/spec/run_spec.h"
#include "common/version.h"
#include "controller/app/spec_paths.h"
#include "controller/shell/lease_rules.h"
#include "controller/shell/startup_checks.h"

namespace trellis::controller {
namespace {

using V = CheckLine::Verdict;

int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string FileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A live lease's holder, or nothing (no lease, or one left by a controller
// that stopped renewing it).
std::optional<LeaseHolder> LiveHolder(const std::string& state_dir) {
  auto h = ParseLease(FileText(state_dir + "/controller.lease"));
  if (!h.ok() || NowUnix() - h->renewed_unix >= h->ttl_s) return std::nullopt;
  return *h;
}

}  // namespace

CheckLine StoreLine(const ControllerFlags& flags) {
  auto fs = FilesystemOf(flags.db_path);
  StoreJournal journal = ChooseStoreJournal(flags.db_journal, flags.db_path, fs);
  if (access(flags.state_dir.c_str(), W_OK) != 0)
    return {"store", V::kFail, "the state directory " + flags.state_dir + " is not writable"};
  if (fs.ok() && fs->network && journal.journal == sqlite::Journal::kWal)
    return {"store", V::kFail,
            journal.said + ": WAL's index is one host's shared memory, and a controller on "
                           "another host would corrupt the database; use --db-journal auto"};
  return {"store", V::kOk, journal.said};
}

CheckLine LeaseLine(const std::string& state_dir, const std::string& host) {
  const std::string path = state_dir + "/controller.lease";
  std::optional<LeaseHolder> holder = LiveHolder(state_dir);
  if (!holder)
    return {"lease", V::kOk, path + ": no controller holds the state directory now"};
  return {"lease", V::kOk,
          "held by " + DescribeHolder(*holder, NowUnix()) +
              (holder->host == host && holder->pid == getpid() ? " (this controller)" : "")};
}

absl::StatusOr<DoctorInputs> DoctorInputsFor(const ControllerFlags& flags,
                                             const std::string& spec_toml,
                                             const std::string& controller_addr,
                                             std::vector<CheckLine>* spec_lines) {
  const ControllerConfig& config = flags.config;
  DoctorInputs in;
  in.slurm_bin_dir = flags.slurm_bin_dir;
  in.slurm_timeout_s = flags.slurm_timeout_s;
  in.partition = config.default_partition;
  in.worker_bin = config.worker_bin;
  in.controller_addr = controller_addr;
  in.controller_file = ControllerAddressPath(flags.state_dir);
  in.tls_ca = config.worker_tls_ca;
  in.node_paths = {config.output_root};
  in.version = kVersion;
  if (spec_toml.empty()) return in;
  spec::FieldErrors errors;
  std::optional<spec::RunSpec> spec = spec::ParseRunSpec(spec_toml, &errors);
  if (!spec) return absl::InvalidArgumentError(spec::JoinErrors(errors));
  if (!spec->slurm.partition.empty()) in.partition = spec->slurm.partition;
  in.account = spec->slurm.account;
  in.expect_gpus = spec->slurm.gpus_per_node;
  if (spec->has_model) {
    const auto roots = config.data_roots.empty() ? DefaultDataRoots(config.output_root)
                                                 : config.data_roots;
    auto data = ResolveTrainingData(spec->trainer.training.data, roots);
    if (data.ok()) {
      spec_lines->push_back({"spec data", V::kOk, *data});
      in.node_paths.push_back(*data);
    } else {
      spec_lines->push_back({"spec data", V::kFail, std::string(data.status().message())});
    }
    if (!spec->trainer.training.init_from.empty())
      in.node_paths.push_back(spec->trainer.training.init_from);
  }
  return in;
}

int RunSiteCheck(const ControllerFlags& flags, const std::string& host) {
  std::vector<CheckLine> lines = {StoreLine(flags), LeaseLine(flags.state_dir, host)};
  // The node dials the controller that serves this state directory, if one does.
  std::string addr;
  if (LiveHolder(flags.state_dir)) {
    auto a = ReadControllerAddress(ControllerAddressPath(flags.state_dir));
    if (a.ok()) addr = a->address;
  }
  if (addr.empty())
    lines.push_back({"controller", V::kSkip,
                     "none serves " + flags.state_dir +
                         ": whether compute nodes reach it is checked once one does "
                         "(trellis doctor)"});
  auto in = DoctorInputsFor(flags, "", addr, &lines);
  if (in.ok()) {
    for (CheckLine& l : RunDoctor(*in)) lines.push_back(std::move(l));
  } else {
    lines.push_back({"inputs", V::kFail, std::string(in.status().message())});
  }
  for (const CheckLine& l : lines) std::cout << FormatCheckLine(l) << "\n";
  return AnyFailed(lines) ? 1 : 0;
}

}  // namespace trellis::controller
