#include "controller/rpc/log_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace trellis::controller {

namespace fs = std::filesystem;

namespace {

// The numeric suffix of "launch-3" / "rank-12.log"; -1 otherwise.
int NumberAfter(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return -1;
  size_t end = name.find('.', prefix.size());
  std::string digits = name.substr(prefix.size(), end - prefix.size());
  if (digits.empty() || digits.size() > 6 ||
      !std::all_of(digits.begin(), digits.end(), ::isdigit))
    return -1;
  return std::stoi(digits);
}

std::string Numbers(std::vector<int> n) {
  std::sort(n.begin(), n.end());
  std::vector<std::string> s;
  for (int v : n) s.push_back(std::to_string(v));
  return s.empty() ? "none" : absl::StrJoin(s, ", ");
}

absl::Status NotFound(const std::string& what) { return absl::NotFoundError(what); }

}  // namespace

absl::StatusOr<LogFiles> FindLogFiles(const RunView& view, const v1::ReadLogsRequest& req) {
  const std::string& id = view.run.run_id;
  std::vector<int> attempts;
  for (const AttemptRecord& a : view.attempts) attempts.push_back(a.attempt);
  int attempt = req.attempt();
  if (attempt == 0) {
    if (attempts.empty()) return LogFiles{};
    attempt = *std::max_element(attempts.begin(), attempts.end());
  } else if (std::find(attempts.begin(), attempts.end(), attempt) == attempts.end() &&
             !fs::is_directory(view.run.run_dir + "/attempt-" + std::to_string(attempt))) {
    return NotFound("run " + id + " has no attempt " + std::to_string(attempt) +
                    "; its attempts: " + Numbers(attempts));
  }
  const std::string attempt_dir = view.run.run_dir + "/attempt-" + std::to_string(attempt);
  std::error_code ec;
  LogFiles out;
  if (req.batch_script()) {
    out.dir = attempt_dir;
    for (const auto& e : fs::directory_iterator(attempt_dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("slurm-", 0) == 0 && name.size() > 10 &&
          name.compare(name.size() - 4, 4, ".out") == 0)
        out.files.push_back({-1, e.path().string()});
    }
    std::sort(out.files.begin(), out.files.end(),
              [](const LogFile& a, const LogFile& b) { return a.path < b.path; });
    return out;
  }
  std::vector<int> launches;
  for (const auto& e : fs::directory_iterator(attempt_dir, ec)) {
    const int n = NumberAfter(e.path().filename().string(), "launch-");
    if (n > 0) launches.push_back(n);
  }
  int launch = req.launch();
  if (launch == 0) {
    if (launches.empty()) return out;
    launch = *std::max_element(launches.begin(), launches.end());
  } else if (std::find(launches.begin(), launches.end(), launch) == launches.end()) {
    return NotFound("attempt " + std::to_string(attempt) + " of run " + id +
                    " has no launch " + std::to_string(launch) + "; its launches: " +
                    Numbers(launches));
  }
  const int world = view.run.nodes * view.run.ranks_per_node;
  if (req.rank() >= world && world > 0)
    return NotFound("run " + id + " has ranks 0.." + std::to_string(world - 1) + "; no rank " +
                    std::to_string(req.rank()));
  // A node's ranks: its place in the launch's nodes (rank order).
  int first = req.rank() >= 0 ? req.rank() : 0;
  int last = req.rank() >= 0 ? req.rank() : (1 << 30);
  if (!req.node().empty()) {
    std::vector<std::string> nodes;
    for (const LaunchRecord& l : view.launches)
      if (l.attempt == attempt && l.launch == launch && !l.nodes.empty())
        nodes = absl::StrSplit(l.nodes, ',');
    auto it = std::find(nodes.begin(), nodes.end(), req.node());
    if (it == nodes.end())
      return NotFound("node " + req.node() + " ran no rank of launch " +
                      std::to_string(attempt) + "." + std::to_string(launch) + " of run " + id +
                      "; its nodes: " + (nodes.empty() ? "not known" : absl::StrJoin(nodes, ", ")));
    const int index = static_cast<int>(it - nodes.begin());
    first = std::max(first, index * view.run.ranks_per_node);
    last = std::min(last, (index + 1) * view.run.ranks_per_node - 1);
  }
  out.dir = attempt_dir + "/launch-" + std::to_string(launch);
  for (const auto& e : fs::directory_iterator(out.dir, ec)) {
    // rank-R.log, not its times beside it (rank-R.log.times) nor other files.
    const std::string name = e.path().filename().string();
    const int rank = NumberAfter(name, "rank-");
    if (rank >= first && rank <= last && name == "rank-" + std::to_string(rank) + ".log")
      out.files.push_back({rank, e.path().string()});
  }
  std::sort(out.files.begin(), out.files.end(),
            [](const LogFile& a, const LogFile& b) { return a.rank < b.rank; });
  return out;
}

uint64_t TailOffset(const std::string& path, int lines) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || lines <= 0) return 0;
  const int64_t size = static_cast<int64_t>(in.tellg());
  int64_t pos = size;
  int newlines = 0;
  // The last byte's newline ends the last line; it does not start one.
  bool skip_final = true;
  std::string block;
  while (pos > 0) {
    const int64_t n = std::min<int64_t>(pos, 64 * 1024);
    pos -= n;
    block.resize(static_cast<size_t>(n));
    in.seekg(pos);
    in.read(block.data(), n);
    for (int64_t i = n - 1; i >= 0; --i) {
      if (block[static_cast<size_t>(i)] != '\n') {
        skip_final = false;
        continue;
      }
      if (skip_final && pos + i == size - 1) {
        skip_final = false;
        continue;
      }
      if (++newlines == lines) return static_cast<uint64_t>(pos + i + 1);
    }
  }
  return 0;
}

}  // namespace trellis::controller
