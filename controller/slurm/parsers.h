#pragma once
// Pure parsers of Slurm's command output, tested on golden outputs captured
// from a real Slurm 22.05 cluster (tests/fixtures/slurm/). They read Slurm's
// words into the typed facts of controller/core/slurm_facts.h; ExpandHostlist
// (controller/core/hostlist.h) comes with them.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/core/hostlist.h"
#include "controller/core/slurm_facts.h"

namespace trellis::controller {

// `sbatch --parsable`: "1234" or "1234;cluster".
absl::StatusOr<std::string> ParseSbatchParsable(std::string_view out);

// `squeue -h -o '%i|%T|%N|%l|%L|%r'`: one job per line (kSqueueFormat).
inline constexpr const char* kSqueueFormat = "%i|%T|%N|%l|%L|%r";
absl::StatusOr<std::vector<SlurmJob>> ParseSqueue(std::string_view out);

// `scontrol show job -o ID`: one line of Key=Value pairs.
absl::StatusOr<SlurmJob> ParseScontrolJob(std::string_view out);
// The Key=Value pairs of one scontrol line (values may contain spaces).
std::map<std::string, std::string> ParseScontrolPairs(std::string_view line);

// `sacct -D -n -P -X -o JobID,State,ExitCode,NodeList -j ID`: one job per id,
// its latest run, with `restarts` the runs listed before it (-D lists each run
// of a requeued job: REQUEUED, ..., then the latest), Slurm's restart count
// where scontrol no longer knows the job.
absl::StatusOr<std::vector<SlurmJob>> ParseSacct(std::string_view out);

// `sacctmgr -nP show assoc where user=U format=account,qos`: "ACCOUNT|Q1,Q2"
// per line (a line per cluster and partition: an account once, its QOS merged).
absl::StatusOr<std::vector<SlurmAssociation>> ParseAssociations(std::string_view out);

// `sinfo -h -N -o '%N|%T'` (a node may appear once per partition: deduplicated).
absl::StatusOr<std::vector<SlurmNode>> ParseSinfoNodes(std::string_view out);

// Slurm's durations as squeue prints them: "M:SS", "H:MM:SS", "D-HH:MM:SS";
// nullopt for "UNLIMITED", "NOT_SET", "INVALID" and anything else.
std::optional<std::chrono::seconds> ParseSlurmDuration(std::string_view field);

// "0:0" -> 0, "3:0" -> 3, "0:9" -> 137.
std::optional<int> ParseExitCode(std::string_view field);

}  // namespace trellis::controller
