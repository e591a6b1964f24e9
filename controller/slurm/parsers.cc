#include "controller/slurm/parsers.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace trellis::controller {
namespace {

// Small local helpers: the system absl has its own string_view type, so its
// string utilities do not take std::string_view.
std::vector<std::string_view> Split(std::string_view s, char sep, bool skip_empty = false,
                                    size_t max_parts = SIZE_MAX) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t end = parts.size() + 1 >= max_parts ? std::string_view::npos : s.find(sep, start);
    std::string_view part = s.substr(start, end == std::string_view::npos ? end : end - start);
    if (!skip_empty || !part.empty()) parts.push_back(part);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

std::string_view Strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && !s.empty();
}

std::vector<std::string_view> Lines(std::string_view out) {
  std::vector<std::string_view> lines;
  for (std::string_view l : Split(out, '\n')) {
    l = Strip(l);
    if (!l.empty()) lines.push_back(l);
  }
  return lines;
}

// "CANCELLED by 0" -> kCancelled; "CANCELLED+" -> kCancelled.
SlurmJobState BaseState(std::string_view s) {
  size_t end = s.find_first_of(" +");
  return SlurmJobState(s.substr(0, end));
}

}  // namespace

absl::StatusOr<std::string> ParseSbatchParsable(std::string_view out) {
  std::string_view line = Strip(out);
  std::string_view id = line.substr(0, line.find(';'));
  uint64_t n;
  if (id.empty() || !ParseNumber(id, &n))
    return absl::InternalError("sbatch --parsable printed '" + std::string(line) +
                               "', expected a job id");
  return std::string(id);
}

std::optional<int> ParseExitCode(std::string_view field) {
  std::vector<std::string_view> parts = Split(field, ':');
  int code, sig;
  // An exit status is 0..255 and a signal at most 127, so 128 + signal is one too.
  if (parts.size() != 2 || !ParseNumber(parts[0], &code) || !ParseNumber(parts[1], &sig) ||
      code < 0 || code > 255 || sig < 0 || sig > 127)
    return std::nullopt;
  return sig != 0 ? 128 + sig : code;
}

std::optional<std::chrono::seconds> ParseSlurmDuration(std::string_view field) {
  int64_t days = 0;
  if (size_t dash = field.find('-'); dash != std::string_view::npos) {
    int d;
    if (!ParseNumber(field.substr(0, dash), &d) || d < 0) return std::nullopt;
    days = d;
    field = field.substr(dash + 1);
  }
  std::vector<std::string_view> parts = Split(field, ':');
  // M:SS, H:MM:SS; with days always H:MM:SS.
  if (parts.size() != 3 && (parts.size() != 2 || days > 0)) return std::nullopt;
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    int v;
    if (!ParseNumber(parts[i], &v) || v < 0 || (i > 0 && v > 59)) return std::nullopt;
    total = total * 60 + v;
  }
  return std::chrono::seconds(days * 86400 + total);
}

absl::StatusOr<std::vector<SlurmJob>> ParseSqueue(std::string_view out) {
  std::vector<SlurmJob> jobs;
  for (std::string_view line : Lines(out)) {
    // The reason is last: the only field that may hold a '|'.
    auto f = Split(line, '|', false, 6);
    if (f.size() != 6)
      return absl::InternalError("squeue line '" + std::string(line) +
                                 "': expected 6 '|'-separated fields (" + kSqueueFormat + ")");
    SlurmJob job{std::string(f[0]), BaseState(f[1]), std::string(f[5]), std::string(f[2]),
                 std::nullopt, std::nullopt};
    job.time_limit = ParseSlurmDuration(f[3]);
    job.time_left = ParseSlurmDuration(f[4]);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::map<std::string, std::string> ParseScontrolPairs(std::string_view line) {
  std::map<std::string, std::string> pairs;
  std::string* last = nullptr;
  for (std::string_view tok : Split(line, ' ', true)) {
    size_t eq = tok.find('=');
    bool is_key = eq != std::string_view::npos && eq > 0;
    for (size_t i = 0; is_key && i < eq; ++i)
      is_key = std::isalnum(static_cast<unsigned char>(tok[i])) || tok[i] == '_' ||
               tok[i] == ':' || tok[i] == '/';
    if (is_key) {
      last = &pairs[std::string(tok.substr(0, eq))];
      *last = std::string(tok.substr(eq + 1));
    } else if (last != nullptr) {
      *last += " " + std::string(tok);  // a value with spaces (e.g. a path)
    }
  }
  return pairs;
}

absl::StatusOr<SlurmJob> ParseScontrolJob(std::string_view out) {
  std::vector<std::string_view> lines = Lines(out);
  if (lines.empty()) return absl::InternalError("scontrol show job printed nothing");
  auto pairs = ParseScontrolPairs(lines[0]);
  // An empty value is as good as none: a job without an id or a state
  // cannot be matched to a run or acted on.
  if (pairs["JobId"].empty() || pairs["JobState"].empty())
    return absl::InternalError("scontrol show job: no JobId/JobState in '" +
                               std::string(lines[0].substr(0, 120)) + "'");
  SlurmJob job{pairs["JobId"], BaseState(pairs["JobState"]), pairs["Reason"], pairs["NodeList"],
               std::nullopt, std::nullopt};
  if (job.nodelist == "(null)") job.nodelist.clear();
  if (pairs.count("ExitCode")) job.exit_code = ParseExitCode(pairs["ExitCode"]);
  int restarts = 0;
  if (ParseNumber(pairs["Restarts"], &restarts) && restarts >= 0) job.restarts = restarts;
  return job;
}

absl::StatusOr<std::vector<SlurmJob>> ParseSacct(std::string_view out) {
  std::vector<SlurmJob> jobs;
  for (std::string_view line : Lines(out)) {
    auto f = Split(line, '|');
    if (f.size() < 3)
      return absl::InternalError("sacct line '" + std::string(line) + "': expected >= 3 fields");
    SlurmJob run{std::string(f[0]), BaseState(f[1]), "", f.size() > 3 ? std::string(f[3]) : "",
                 ParseExitCode(f[2]), 0};
    // -D lists every run of a requeued job, oldest first: the last one is the
    // job now, the ones before it its requeues.
    auto same = std::find_if(jobs.begin(), jobs.end(),
                             [&](const SlurmJob& j) { return j.id == run.id; });
    if (same == jobs.end()) {
      jobs.push_back(std::move(run));
    } else {
      run.restarts = *same->restarts + 1;
      *same = std::move(run);
    }
  }
  return jobs;
}

absl::StatusOr<std::vector<SlurmAssociation>> ParseAssociations(std::string_view out) {
  std::vector<SlurmAssociation> out_assocs;
  for (std::string_view line : Lines(out)) {
    auto f = Split(line, '|');
    if (f.size() != 2 || f[0].empty())
      return absl::InternalError("sacctmgr line '" + std::string(line) +
                                 "': expected ACCOUNT|QOS,...");
    auto same = std::find_if(out_assocs.begin(), out_assocs.end(),
                             [&](const SlurmAssociation& a) { return a.account == f[0]; });
    if (same == out_assocs.end())
      same = out_assocs.insert(out_assocs.end(), SlurmAssociation{std::string(f[0]), {}});
    for (std::string_view q : Split(f[1], ','))
      if (!q.empty() && std::find(same->qos.begin(), same->qos.end(), q) == same->qos.end())
        same->qos.emplace_back(q);
  }
  return out_assocs;
}

absl::StatusOr<std::vector<SlurmNode>> ParseSinfoNodes(std::string_view out) {
  std::vector<SlurmNode> nodes;
  for (std::string_view line : Lines(out)) {
    auto f = Split(line, '|');
    if (f.size() != 2)
      return absl::InternalError("sinfo line '" + std::string(line) + "': expected NODE|STATE");
    bool seen = false;
    for (const auto& n : nodes) seen = seen || n.name == f[0];
    if (!seen) nodes.push_back({std::string(f[0]), SlurmNodeState(f[1])});
  }
  return nodes;
}

}  // namespace trellis::controller
