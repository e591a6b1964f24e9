#include "controller/core/batch_script.h"

#include <algorithm>
#include <set>

namespace trellis::controller {
namespace {

bool IsSafeAbsolutePath(const std::string& p) {
  if (p.empty() || p[0] != '/' || p.size() > 4096) return false;
  return std::none_of(p.begin(), p.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

bool IsSafeAddress(const std::string& a) {
  return !a.empty() && a.size() <= 255 && std::all_of(a.begin(), a.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == ':' || c == '-' ||
           c == '[' || c == ']' || c == '_';
  });
}

// What a worker's command line in a batch script is made of, before it is
// quoted into it.
absl::Status CheckWorkerCommand(const std::string& run_dir, const std::string& worker_bin,
                                const std::string& secret_file, const std::string& tls_ca,
                                const std::string& controller_addr,
                                const std::string& controller_file) {
  for (const auto* path : {&run_dir, &worker_bin, &secret_file})
    if (!IsSafeAbsolutePath(*path))
      return absl::InvalidArgumentError("path '" + *path +
                                        "' must be absolute, without control characters");
  if (!tls_ca.empty() && !IsSafeAbsolutePath(tls_ca))
    return absl::InvalidArgumentError("TLS CA path '" + tls_ca +
                                      "' must be absolute, without control characters");
  if (!controller_file.empty() && !IsSafeAbsolutePath(controller_file))
    return absl::InvalidArgumentError("controller address file '" + controller_file +
                                      "' must be absolute, without control characters");
  if (!IsSafeAddress(controller_addr))
    return absl::InvalidArgumentError("controller address '" + controller_addr +
                                      "' must be host:port");
  return absl::OkStatus();
}

void ReplaceAll(std::string* s, const std::string& from, const std::string& to) {
  for (size_t pos = s->find(from); pos != std::string::npos; pos = s->find(from, pos + to.size()))
    s->replace(pos, from.size(), to);
}

}  // namespace

std::string ShellQuote(const std::string& value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'')
      out += "'\"'\"'";
    else
      out += c;
  }
  return out + "'";
}

absl::StatusOr<std::string> RenderBatchScript(const std::string& template_text,
                                              const AttemptPaths& p) {
  if (!spec::IsValidRunName(p.run_id))
    return absl::InvalidArgumentError("run id '" + p.run_id + "' is not [a-z0-9-]");
  if (p.attempt < 1) return absl::InvalidArgumentError("attempt must be >= 1");
  if (absl::Status st = CheckWorkerCommand(p.run_dir, p.worker_bin, p.secret_file, p.tls_ca,
                                           p.controller_addr, p.controller_file);
      !st.ok())
    return st;
  // Every @KEY@ of the template must be known (checked before the values go
  // in: a path may hold '@').
  static const std::set<std::string, std::less<>> kKeys = {
      "RUN_ID", "ATTEMPT",     "WORKER", "CONTROLLER", "CONTROLLER_FILE",
      "RUN_DIR", "SECRET_FILE", "TLS_CA"};
  for (size_t at = template_text.find('@'); at != std::string::npos;
       at = template_text.find('@', at + 1)) {
    size_t end = at + 1;
    while (end < template_text.size() &&
           (std::isupper(static_cast<unsigned char>(template_text[end])) ||
            template_text[end] == '_'))
      ++end;
    if (end == at + 1 || end == template_text.size() || template_text[end] != '@') continue;
    const std::string_view key(template_text.data() + at + 1, end - at - 1);
    if (!kKeys.count(key))
      return absl::InvalidArgumentError("batch script template has an unknown placeholder @" +
                                        std::string(key) + "@");
    at = end;
  }
  std::string out = template_text;
  ReplaceAll(&out, "@RUN_ID@", ShellQuote(p.run_id));
  ReplaceAll(&out, "@ATTEMPT@", std::to_string(p.attempt));
  ReplaceAll(&out, "@WORKER@", ShellQuote(p.worker_bin));
  ReplaceAll(&out, "@CONTROLLER_FILE@", ShellQuote(p.controller_file));
  ReplaceAll(&out, "@CONTROLLER@", ShellQuote(p.controller_addr));
  ReplaceAll(&out, "@RUN_DIR@", ShellQuote(p.run_dir));
  ReplaceAll(&out, "@SECRET_FILE@", ShellQuote(p.secret_file));
  ReplaceAll(&out, "@TLS_CA@", ShellQuote(p.tls_ca));
  return out;
}

std::string AttemptJobName(const std::string& run_id, int attempt, std::string_view tag) {
  return "trellis-" + run_id + "." + std::to_string(attempt) + "." + std::string(tag.substr(0, 8));
}

std::string PoolJobName(const std::string& run_id, int pool, std::string_view tag) {
  return "trellis-pool-" + run_id + "." + std::to_string(pool) + "." +
         std::string(tag.substr(0, 8));
}

namespace {
std::string JoinedExclude(const std::vector<std::string>& nodes) {
  std::string joined;
  for (const auto& n : nodes) joined += (joined.empty() ? "" : ",") + n;
  return "--exclude=" + joined;
}
}  // namespace

std::string PoolSecretPath(const std::string& run_dir, int pool) {
  return run_dir + "/pool-" + std::to_string(pool) + ".secret";
}

absl::StatusOr<std::vector<std::string>> PoolSbatchArgs(
    const spec::RunSpec& spec, const std::string& run_id, const std::string& run_dir,
    const std::string& job_name, int pool, const std::vector<std::string>& exclude_nodes,
    const PoolStandbyPaths& standby) {
  if (!spec::IsValidRunName(run_id))
    return absl::InvalidArgumentError("run id '" + run_id + "' is not [a-z0-9-]");
  if (absl::Status st = CheckWorkerCommand(run_dir, standby.worker_bin, standby.secret_file,
                                           standby.tls_ca, standby.controller_addr,
                                           standby.controller_file);
      !st.ok())
    return st;
  const auto& sl = spec.slurm;
  std::vector<std::string> args = {
      "--job-name=" + job_name,
      "--nodes=" + std::to_string(spec.restart.spare_pool_nodes),
      "--ntasks-per-node=1",
      "--output=" + run_dir + "/pool-" + std::to_string(pool) + ".out",
      "--open-mode=append",
      "--chdir=" + run_dir,
      // One of its nodes failing leaves it the others.
      "--no-kill",
  };
  if (sl.time_limit_minutes > 0) args.push_back("--time=" + std::to_string(sl.time_limit_minutes));
  if (!sl.partition.empty()) args.push_back("--partition=" + sl.partition);
  if (!sl.account.empty()) args.push_back("--account=" + sl.account);
  if (sl.gpus_per_node > 0) args.push_back("--gpus-per-node=" + std::to_string(sl.gpus_per_node));
  if (!exclude_nodes.empty()) args.push_back(JoinedExclude(exclude_nodes));
  args.insert(args.end(), sl.extra_args.begin(), sl.extra_args.end());
  // The standby step's end (drawn, ended, or its worker failed) leaves the
  // allocation held: a relaunch may still run in it.
  std::string wrap = "srun --overlap --ntasks-per-node=1 --kill-on-bad-exit=0 " +
                     ShellQuote(standby.worker_bin) + " standby --controller " +
                     ShellQuote(standby.controller_addr) + " --run " + ShellQuote(run_id) +
                     " --pool " + std::to_string(pool) + " --run-dir " + ShellQuote(run_dir) +
                     " --secret-file " + ShellQuote(standby.secret_file);
  if (!standby.tls_ca.empty()) wrap += " --tls-ca " + ShellQuote(standby.tls_ca);
  if (!standby.controller_file.empty())
    wrap += " --controller-file " + ShellQuote(standby.controller_file);
  args.push_back("--wrap=" + wrap + "; exec sleep infinity");
  return args;
}

std::vector<std::string> SbatchArgs(const spec::RunSpec& spec, const AttemptPaths& p,
                                    const std::vector<std::string>& exclude_nodes) {
  const auto& sl = spec.slurm;
  std::string attempt_dir = p.run_dir + "/attempt-" + std::to_string(p.attempt);
  std::vector<std::string> args = {
      "--job-name=" + AttemptJobName(p.run_id, p.attempt, p.job_tag),
      "--nodes=" + std::to_string(spec.total_nodes()),
      "--ntasks-per-node=1",
      "--output=" + attempt_dir + "/slurm-%j.out",
      "--open-mode=append",
      "--chdir=" + p.run_dir,
      "--signal=B:USR1@" + std::to_string(sl.signal_grace_s),
      // A node that fails does not end the allocation: the controller
      // relaunches on the nodes left (NextLaunch's `nodes`, srun --nodelist in
      // the batch script) instead of queueing a new attempt.
      "--no-kill",
  };
  if (sl.time_limit_minutes > 0) args.push_back("--time=" + std::to_string(sl.time_limit_minutes));
  if (!sl.partition.empty()) args.push_back("--partition=" + sl.partition);
  if (!sl.account.empty()) args.push_back("--account=" + sl.account);
  if (!sl.nodelist.empty()) args.push_back("--nodelist=" + sl.nodelist);
  if (sl.gpus_per_node > 0) args.push_back("--gpus-per-node=" + std::to_string(sl.gpus_per_node));
  if (!exclude_nodes.empty()) args.push_back(JoinedExclude(exclude_nodes));
  args.insert(args.end(), sl.extra_args.begin(), sl.extra_args.end());
  return args;
}

}  // namespace trellis::controller
