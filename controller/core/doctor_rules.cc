#include "controller/core/doctor_rules.h"

#include <algorithm>
#include <sstream>

namespace trellis::controller {
namespace {

using V = CheckLine::Verdict;

std::string Trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  return std::string(s);
}

// The last non-empty line of a command's output: where Slurm and munge say why.
std::string LastLine(const std::string& text) {
  std::string t = Trimmed(text);
  size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

// Its last `n` non-empty lines, joined by " / ".
std::string LastLines(const std::string& text, int n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!Trimmed(l).empty()) lines.push_back(Trimmed(l));
  std::string out;
  for (size_t i = lines.size() > static_cast<size_t>(n) ? lines.size() - n : 0; i < lines.size();
       ++i)
    out += (out.empty() ? "" : " / ") + lines[i];
  return out;
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace

CheckLine SlurmCommandsLine(const std::vector<std::string>& missing, const std::string& where,
                            const std::string& version) {
  if (!missing.empty())
    return {"slurm commands", V::kFail,
            Joined(missing) + " not found in " + where +
                ": install Slurm's client commands on this host, or give --slurm-bin-dir"};
  std::vector<std::string> all(std::begin(kSlurmCommandsNeeded), std::end(kSlurmCommandsNeeded));
  return {"slurm commands", V::kOk,
          Joined(all) + " in " + where + (version.empty() ? "" : " (" + version + ")")};
}

CheckLine SlurmctldLine(const CommandResult& ping) {
  // "Slurmctld(primary) at HOST is UP|DOWN", then, when down, a banner.
  std::string said = LastLine(ping.out.empty() ? ping.err : ping.out);
  if (size_t at = ping.out.find("Slurmctld("); at != std::string::npos)
    said = ping.out.substr(at, ping.out.find('\n', at) - at);
  if (ping.timed_out)
    return {"slurmctld", V::kFail, "scontrol ping did not answer in time: is slurmctld up?"};
  if (ping.exit_code == 0 && said.find("is UP") != std::string::npos)
    return {"slurmctld", V::kOk, said};
  return {"slurmctld", V::kFail,
          "scontrol ping: " + (said.empty() ? "exit " + std::to_string(ping.exit_code) : said) +
              "; Slurm's controller does not answer: ask the site, or check SLURM_CONF"};
}

AuthConfig ParseAuthConfig(std::string_view show_config) {
  AuthConfig a;
  std::istringstream in{std::string(show_config)};
  for (std::string line; std::getline(in, line);) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = Trimmed(std::string_view(line).substr(0, eq));
    const std::string value = Trimmed(std::string_view(line).substr(eq + 1));
    if (key == "AuthType") a.type = value;
    if (key == "AuthInfo") {
      size_t at = value.find("socket=");
      if (at != std::string::npos) {
        size_t end = value.find(',', at);
        a.socket = value.substr(at + 7, end == std::string::npos ? end : end - at - 7);
      }
    }
  }
  return a;
}

CheckLine MungeLine(const CommandResult& roundtrip, const std::string& socket) {
  const std::string via = socket.empty() ? "" : " (socket " + socket + ")";
  if (roundtrip.exit_code == 0 && !roundtrip.timed_out)
    return {"munge", V::kOk, "a credential made and decoded" + via};
  const std::string said = LastLine(roundtrip.err.empty() ? roundtrip.out : roundtrip.err);
  return {"munge", V::kFail,
          "munge -n | unmunge failed" + via + (said.empty() ? "" : ": " + said) +
              "; Slurm authenticates every command with munge: munged must run on this "
              "host with the cluster's key (the site's admins)"};
}

std::vector<PartitionSeen> ParsePartitions(std::string_view sinfo_out) {
  std::vector<PartitionSeen> seen;
  std::istringstream in{std::string(sinfo_out)};
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, '|');) f.push_back(Trimmed(x));
    if (f.size() < 3 || f[0].empty()) continue;
    PartitionSeen p;
    p.name = f[0];
    if (p.name.back() == '*') {
      p.is_default = true;
      p.name.pop_back();
    }
    p.up = f[1] == "up";
    p.nodes = std::atoi(f[2].c_str());
    if (f.size() > 3) {
      // gres "gpu:4", "gpu:h100:4", "gpu:h100:4(S:0-1)", several comma-separated.
      std::istringstream gres(f[3]);
      for (std::string g; std::getline(gres, g, ',');) {
        if (g.rfind("gpu", 0) != 0) continue;
        g = g.substr(0, g.find('('));
        size_t colon = g.rfind(':');
        if (colon != std::string::npos) p.gpus_per_node += std::atoi(g.c_str() + colon + 1);
      }
    }
    auto same = std::find_if(seen.begin(), seen.end(),
                             [&](const PartitionSeen& s) { return s.name == p.name; });
    if (same == seen.end()) {
      seen.push_back(p);
    } else {  // one line per node state: add them up
      same->nodes += p.nodes;
      same->gpus_per_node = std::max(same->gpus_per_node, p.gpus_per_node);
    }
  }
  return seen;
}

CheckLine SinfoFailedLine(const CommandResult& sinfo) {
  const std::string said = LastLines(sinfo.err.empty() ? sinfo.out : sinfo.err, 2);
  return {"partition", V::kFail,
          "sinfo failed" + (said.empty() ? "" : ": " + said) + "; the partitions cannot be read"};
}

CheckLine PartitionLine(const std::string& wanted, const std::vector<PartitionSeen>& seen,
                        std::optional<PartitionSeen>* chosen) {
  std::vector<std::string> names;
  for (const auto& p : seen) names.push_back(p.name + (p.is_default ? "*" : ""));
  auto it = std::find_if(seen.begin(), seen.end(), [&](const PartitionSeen& p) {
    return wanted.empty() ? p.is_default : p.name == wanted;
  });
  if (it == seen.end()) {
    if (wanted.empty())
      return {"partition", V::kFail,
              "Slurm has no default partition; name one with --partition (or the spec's "
              "slurm.partition): " + (names.empty() ? "none listed" : Joined(names))};
    return {"partition", V::kFail,
            "'" + wanted + "' is not a partition here; the partitions: " +
                (names.empty() ? "none listed" : Joined(names))};
  }
  *chosen = *it;
  const std::string which = it->name + (wanted.empty() ? " (Slurm's default)" : "");
  if (!it->up)
    return {"partition", V::kFail, which + " is not up: jobs there wait; ask the site or choose "
                                   "another: " + Joined(names)};
  return {"partition", V::kOk,
          which + ": up, " + std::to_string(it->nodes) + " node(s)" +
              (it->gpus_per_node > 0 ? ", " + std::to_string(it->gpus_per_node) + " GPU(s) each"
                                     : "")};
}

CheckLine AccountLine(const std::string& wanted,
                      const absl::StatusOr<std::vector<SlurmAssociation>>& associations,
                      bool accounting) {
  if (!accounting)
    return {"account", V::kSkip,
            "Slurm keeps no accounting here (sacct does not answer): accounts are not checked"};
  if (!associations.ok())
    return {"account", V::kFail,
            "sacctmgr: " + std::string(associations.status().message()) +
                "; accounts and QOS cannot be checked"};
  std::vector<std::string> accounts;
  for (const auto& a : *associations) accounts.push_back(a.account);
  if (accounts.empty())
    return {"account", V::kFail,
            "this user has no association in Slurm's accounting: jobs are refused; ask the "
            "site for an account"};
  if (wanted.empty()) return {"account", V::kOk, "associations: " + Joined(accounts)};
  if (std::find(accounts.begin(), accounts.end(), wanted) == accounts.end())
    return {"account", V::kFail,
            "'" + wanted + "' is not one of this user's accounts: " + Joined(accounts)};
  return {"account", V::kOk, "'" + wanted + "' is one of this user's accounts"};
}

std::vector<CheckLine> NodeLines(const CommandResult& srun, const std::string& worker_bin,
                                 const std::string& partition,
                                 const std::string& controller_version) {
  std::vector<CheckLine> lines;
  std::string node = "?";
  std::istringstream out(srun.out);
  for (std::string line; std::getline(out, line);) {
    if (line.rfind("node=", 0) == 0) {
      node = Trimmed(line.substr(5));
      continue;
    }
    auto l = ParseCheckLineJson(line);
    if (!l.ok()) continue;  // srun's own words; its stderr says more
    if (l->name == "worker" && l->verdict == V::kOk &&
        l->detail.find(" " + controller_version + " ") == std::string::npos) {
      l->verdict = V::kFail;
      l->detail += "; not this controller's version " + controller_version +
                   ": install the same build where the compute nodes see it";
    }
    l->name = "node " + node + ": " + l->name;
    lines.push_back(*l);
  }
  if (!lines.empty()) return lines;
  const std::string where = partition.empty() ? "the default partition" : "partition " + partition;
  if (srun.timed_out)
    return {{"node", V::kFail,
             "no compute node of " + where + " ran the check in time (its queue? "
             "`squeue -n trellis-doctor`); try again when nodes are free"}};
  const std::string said = LastLines(srun.err.empty() ? srun.out : srun.err, 3);
  // 126/127: the shell could not execute it; anything else: it ran but said
  // no check (an older worker, or one that crashed).
  const bool not_run = said.find("exit code 127") != std::string::npos ||
                       said.find("exit code 126") != std::string::npos ||
                       srun.exit_code == 126 || srun.exit_code == 127;
  if (node != "?" && not_run)
    return {{"node " + node, V::kFail,
             "srun started on " + node + " but could not run " + worker_bin +
                 (said.empty() ? "" : " (" + said + ")") +
                 ": put the install tree on a filesystem the compute nodes mount at the same "
                 "path, or give --worker-bin"}};
  if (node != "?")
    return {{"node " + node, V::kFail,
             worker_bin + " ran on " + node + " but printed no check" +
                 (said.empty() ? "" : " (" + said + ")") +
                 ": is it the controller's own build (version " + controller_version + ")?"}};
  return {{"node", V::kFail,
           "srun on " + where + " failed" + (said.empty() ? "" : ": " + said) +
               "; a run's job would fail the same way"}};
}

}  // namespace trellis::controller
