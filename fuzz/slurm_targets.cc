// The parsers of Slurm's output (controller/slurm/parsers): squeue, scontrol
// show job, sacct, and the hostlists their node lists are expanded from. Slurm's
// output is not ours: whatever it prints, a parser returns a status (never
// throws or reads out of bounds), and what it accepts is well formed.

#include <algorithm>
#include <string>

#include "controller/slurm/parsers.h"
#include "fuzz/check.h"

namespace trellis::fuzz {
namespace {

using controller::SlurmJob;

constexpr size_t kMaxHostlistNames = 100000;  // ExpandHostlist's documented bound

size_t CountLines(std::string_view text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
}

bool Has(const std::string& s, std::string_view chars) {
  return s.find_first_of(chars) != std::string::npos;
}

// An exit status as a shell would see it: 0..255 (128 + N for signal N).
void CheckExitCode(const std::optional<int>& code) {
  if (code) FUZZ_CHECK(*code >= 0 && *code <= 255);
}

// How the controller uses a job's node list (launches, requeue).
void CheckHostlist(const std::string& hostlist) {
  auto names = controller::ExpandHostlist(hostlist);
  if (!names.ok()) {
    FUZZ_CHECK(!names.status().message().empty());
    return;
  }
  FUZZ_CHECK(names->size() <= kMaxHostlistNames);
  for (const auto& n : *names) FUZZ_CHECK(!n.empty() && !Has(n, ","));
}

// Common to every parsed job: a base state (no "+" flags, no "by UID").
void CheckJob(const SlurmJob& job) {
  FUZZ_CHECK(!Has(job.state.name(), " +\n"));
  FUZZ_CHECK(!Has(job.id, "\n") && !Has(job.nodelist, "\n") && !Has(job.reason, "\n"));
  CheckExitCode(job.exit_code);
}

}  // namespace

void FuzzSqueue(const uint8_t* data, size_t size) {
  const std::string_view text = AsText(data, size);
  auto jobs = controller::ParseSqueue(text);
  if (!jobs.ok()) {
    FUZZ_CHECK(!jobs.status().message().empty());
  } else {
    FUZZ_CHECK(jobs->size() <= CountLines(text));
    for (const SlurmJob& job : *jobs) {
      CheckJob(job);
      FUZZ_CHECK(!Has(job.id, "|") && !Has(job.state.name(), "|") && !Has(job.nodelist, "|"));
      FUZZ_CHECK(!job.exit_code.has_value());
      CheckHostlist(job.nodelist);
    }
  }
  // sinfo's NODE|STATE lines are the same shape as squeue's.
  auto nodes = controller::ParseSinfoNodes(text);
  if (nodes.ok()) {
    FUZZ_CHECK(nodes->size() <= CountLines(text));
    for (size_t i = 0; i < nodes->size(); ++i)
      for (size_t j = 0; j < i; ++j) FUZZ_CHECK((*nodes)[i].name != (*nodes)[j].name);
  }
}

void FuzzScontrol(const uint8_t* data, size_t size) {
  const std::string_view text = AsText(data, size);
  auto job = controller::ParseScontrolJob(text);
  if (!job.ok()) {
    FUZZ_CHECK(!job.status().message().empty());
  } else {
    CheckJob(*job);
    FUZZ_CHECK(job->nodelist != "(null)");
    CheckHostlist(job->nodelist);
  }
  const std::string_view first = text.substr(0, text.find('\n'));
  for (const auto& [key, value] : controller::ParseScontrolPairs(first)) {
    FUZZ_CHECK(!key.empty());
    FUZZ_CHECK(std::all_of(key.begin(), key.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == '/';
    }));
  }
}

void FuzzSacct(const uint8_t* data, size_t size) {
  const std::string_view text = AsText(data, size);
  auto jobs = controller::ParseSacct(text);
  if (!jobs.ok()) {
    FUZZ_CHECK(!jobs.status().message().empty());
    return;
  }
  // One job per id; each line is one run of a job (sacct -D), so the runs
  // (restarts + 1 each) add up to no more than the lines.
  size_t runs = 0;
  for (const SlurmJob& job : *jobs) {
    CheckJob(job);
    FUZZ_CHECK(!Has(job.id, "|") && !Has(job.state.name(), "|") && !Has(job.nodelist, "|"));
    CheckHostlist(job.nodelist);
    FUZZ_CHECK(job.restarts.has_value() && *job.restarts >= 0);
    runs += static_cast<size_t>(*job.restarts) + 1;
    size_t same = 0;
    for (const SlurmJob& other : *jobs) same += other.id == job.id ? 1 : 0;
    FUZZ_CHECK(same == 1);
  }
  FUZZ_CHECK(runs <= CountLines(text));
}

}  // namespace trellis::fuzz
