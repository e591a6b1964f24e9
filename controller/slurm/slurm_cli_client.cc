#include "controller/slurm/slurm_cli_client.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "common/subprocess.h"
#include "controller/slurm/parsers.h"

namespace trellis::controller {
namespace {

absl::StatusOr<CommandResult> Run(const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout) {
  CommandOptions o;
  o.timeout = timeout;
  auto r = RunCommand(argv, o);
  if (!r.ok()) return r.status();
  if (r->timed_out)
    return absl::DeadlineExceededError(argv[0] + " did not answer within " +
                                       std::to_string(timeout.count()) + " ms");
  return r;
}

absl::Status Failed(const std::vector<std::string>& argv, const CommandResult& r) {
  std::string err = r.err.empty() ? r.out : r.err;
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  return absl::UnavailableError(argv[0] + " exited with " + std::to_string(r.exit_code) + ": " +
                                err);
}

}  // namespace

std::string SlurmCliClient::Bin(const std::string& name) const {
  return options_.bin_dir.empty() ? name : options_.bin_dir + "/" + name;
}

bool SlurmCliClient::DetectAccounting(const SlurmCliOptions& options) {
  SlurmCliClient c(options);
  auto r = Run({c.Bin("scontrol"), "show", "config"}, options.timeout);
  if (!r.ok() || r->exit_code != 0) return false;
  size_t pos = r->out.find("AccountingStorageType");
  if (pos == std::string::npos) return false;
  size_t eol = r->out.find('\n', pos);
  std::string line = r->out.substr(pos, eol - pos);
  return line.find("accounting_storage/none") == std::string::npos;
}

absl::StatusOr<std::string> SlurmCliClient::Submit(const std::vector<std::string>& args,
                                                   const std::string& script_path) {
  std::vector<std::string> argv = {Bin("sbatch"), "--parsable"};
  argv.insert(argv.end(), args.begin(), args.end());
  if (!script_path.empty()) argv.push_back(script_path);  // none: --wrap among the args
  auto r = Run(argv, options_.timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Failed(argv, *r);
  return ParseSbatchParsable(r->out);
}

absl::StatusOr<std::vector<SlurmJob>> SlurmCliClient::ListJobs() {
  std::vector<std::string> argv = {Bin("squeue"), "-h", "-u", std::to_string(getuid()),
                                   "-o", kSqueueFormat};
  auto r = Run(argv, options_.timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Failed(argv, *r);
  return ParseSqueue(r->out);
}

absl::StatusOr<std::vector<SlurmJob>> SlurmCliClient::JobsNamed(const std::string& name) {
  std::vector<std::string> argv = {Bin("squeue"), "-h", "-u", std::to_string(getuid()),
                                   "-n", name, "-o", kSqueueFormat};
  auto r = Run(argv, options_.timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Failed(argv, *r);
  auto jobs = ParseSqueue(r->out);
  if (!jobs.ok() || !options_.accounting) return jobs;
  // A job that already ended is no longer listed: accounting has it.
  std::vector<std::string> acct = {Bin("sacct"), "-D", "-n", "-P", "-X", "-S", "now-7days",
                                   "--name", name, "-o", "JobID,State,ExitCode,NodeList"};
  auto a = Run(acct, options_.timeout);
  if (!a.ok()) return a.status();
  if (a->exit_code != 0) return Failed(acct, *a);
  auto ended = ParseSacct(a->out);
  if (!ended.ok()) return ended.status();
  for (auto& j : *ended) {
    bool listed = false;
    for (const auto& l : *jobs) listed = listed || l.id == j.id;
    if (!listed) jobs->push_back(std::move(j));
  }
  return jobs;
}

absl::StatusOr<std::optional<SlurmJob>> SlurmCliClient::ShowJob(const std::string& id) {
  std::vector<std::string> argv = {Bin("scontrol"), "show", "job", "-o", id};
  auto r = Run(argv, options_.timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    // Slurm forgets finished jobs after MinJobAge.
    if (r->err.find("Invalid job id") != std::string::npos) return std::nullopt;
    return Failed(argv, *r);
  }
  auto job = ParseScontrolJob(r->out);
  if (!job.ok()) return job.status();
  return std::optional<SlurmJob>(*job);
}

absl::StatusOr<std::optional<SlurmJob>> SlurmCliClient::AccountingJob(const std::string& id) {
  if (!options_.accounting) return absl::UnimplementedError("no Slurm accounting storage");
  std::vector<std::string> argv = {Bin("sacct"), "-D", "-n", "-P", "-X", "-o",
                                   "JobID,State,ExitCode,NodeList", "-j", id};
  auto r = Run(argv, options_.timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Failed(argv, *r);
  auto jobs = ParseSacct(r->out);
  if (!jobs.ok()) return jobs.status();
  for (auto& j : *jobs)
    if (j.id == id) return std::optional<SlurmJob>(j);
  return std::nullopt;
}

absl::Status SlurmCliClient::Cancel(const std::string& id) {
  std::vector<std::string> argv = {Bin("scancel"), id};
  auto r = Run(argv, options_.timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0 && r->err.find("Invalid job id") == std::string::npos)
    return Failed(argv, *r);
  return absl::OkStatus();
}

absl::Status SlurmCliClient::ReleaseWaitingJob(const std::string& id, std::chrono::seconds start_in,
                                               const std::vector<std::string>& exclude) {
  // Always the whole list: an empty one clears the job's --exclude (the
  // nodes it named may have left quarantine since).
  std::string joined;
  for (const auto& n : exclude) joined += (joined.empty() ? "" : ",") + n;
  std::vector<std::string> argv = {Bin("scontrol"), "update", "JobId=" + id,
                                   "StartTime=now+" + std::to_string(start_in.count()),
                                   "ExcNodeList=" + joined};
  auto r = Run(argv, options_.timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Failed(argv, *r);
  return absl::OkStatus();
}

absl::Status SlurmCliClient::SignalStep(const std::string& job_id, const std::string& step_id,
                                        const std::string& signal) {
  std::vector<std::string> argv = {Bin("scancel"), "--signal=" + signal, job_id + "." + step_id};
  auto r = Run(argv, options_.timeout);
  if (!r.ok()) return r.status();
  // A step that ended meanwhile is what the signal was for.
  if (r->exit_code != 0 && r->err.find("Invalid job id") == std::string::npos &&
      r->err.find("does not exist") == std::string::npos)
    return Failed(argv, *r);
  return absl::OkStatus();
}

absl::Status SlurmCliClient::Drain(const std::string& node, const std::string& reason) {
  std::vector<std::string> argv = {Bin("scontrol"), "update", "nodename=" + node, "state=drain",
                                   "reason=trellis: " + reason};
  auto r = Run(argv, options_.timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Failed(argv, *r);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SlurmNode>> SlurmCliClient::ListNodes(const std::string& partition) {
  std::vector<std::string> argv = {Bin("sinfo"), "-h", "-N", "-o", "%N|%T"};
  if (!partition.empty()) argv.insert(argv.end(), {"-p", partition});
  auto r = Run(argv, options_.timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Failed(argv, *r);
  return ParseSinfoNodes(r->out);
}

absl::StatusOr<std::vector<SlurmAssociation>> SlurmCliClient::ListAssociations() {
  // Jobs are submitted as the controller's owner: its associations are theirs.
  const struct passwd* pw = ::getpwuid(::getuid());
  if (pw == nullptr) return absl::NotFoundError("no passwd entry for uid " +
                                                std::to_string(::getuid()));
  std::vector<std::string> argv = {Bin("sacctmgr"), "-nP", "show", "assoc",
                                   "where", std::string("user=") + pw->pw_name,
                                   "format=account,qos"};
  auto r = Run(argv, options_.timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Failed(argv, *r);
  return ParseAssociations(r->out);
}

absl::StatusOr<std::vector<std::string>> SlurmCliClient::ListPartitions() {
  std::vector<std::string> argv = {Bin("sinfo"), "-h", "-o", "%R"};
  auto r = Run(argv, options_.timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Failed(argv, *r);
  std::vector<std::string> names;
  std::istringstream in(r->out);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty() && std::find(names.begin(), names.end(), line) == names.end())
      names.push_back(line);
  }
  return names;
}

}  // namespace trellis::controller
