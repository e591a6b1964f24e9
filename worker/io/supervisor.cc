#include "worker/io/supervisor.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <boost/asio/post.hpp>

#include "absl/strings/str_join.h"
#include "common/log.h"
#include "worker/core/failure_markers.h"
#include "worker/io/log_tail.h"
#include "worker/io/rank_process.h"

namespace trellis::worker {

namespace asio = boost::asio;

namespace {

// Wall time, for the notes people read against their clocks.
int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Supervisor::Supervisor(asio::io_context& io, Clock& clock,
                       std::chrono::steady_clock::duration kill_grace, ExitFn on_rank_exit,
                       std::function<void()> on_all_exited)
    : io_(io),
      kill_grace_(kill_grace),
      on_rank_exit_(std::move(on_rank_exit)),
      on_all_exited_(std::move(on_all_exited)),
      sigchld_(io, SIGCHLD),
      kill_timer_(clock, [&io](std::function<void()> fn) { asio::post(io, std::move(fn)); }),
      notes_timer_(clock, [&io](std::function<void()> fn) { asio::post(io, std::move(fn)); }) {}

Supervisor::~Supervisor() {
  boost::system::error_code ec;
  sigchld_.cancel(ec);
  kill_timer_.Cancel();
  notes_timer_.Cancel();
  // Never leave ranks behind, even when the worker unwinds on an error.
  for (const auto& [pid, rank] : live_) {
    ::killpg(pid, SIGKILL);
    int status;
    ::waitpid(pid, &status, 0);
  }
}

void Supervisor::Start(const std::vector<RankPlan>& plans, const std::vector<std::string>& argv,
                       const std::string& working_dir) {
  // The SIGCHLD handler is installed (constructor) before the first fork, so
  // no exit goes unnoticed.
  expected_ = static_cast<int>(plans.size());
  std::vector<RankExit> failed;
  for (const RankPlan& plan : plans) {
    log_paths_[plan.global_rank] = plan.log_path;
    log_times_.Add(plan.log_path);
    auto pid = SpawnRank(plan, argv, working_dir);
    if (!pid.ok()) {
      spdlog::error("{}", std::string(pid.status().message()));
      failed.push_back({plan.global_rank, kCannotStartExitCode, 0});
      continue;
    }
    spdlog::info("rank {} started, pid {}, log {}", plan.global_rank, *pid, plan.log_path);
    live_[*pid] = plan.global_rank;
  }
  WaitForChildren();
  NoteLogTimes();
  for (const RankExit& e : failed) Record(e);
}

void Supervisor::NoteLogTimes() {
  log_times_.NoteAll(UnixMillisNow());
  if (!live_.empty() && !finished_) notes_timer_.Arm(std::chrono::seconds(1), [this] {
    NoteLogTimes();
  });
}

void Supervisor::WaitForChildren() {
  sigchld_.async_wait([this](boost::system::error_code ec, int) {
    if (ec) return;
    Reap();
    if (!finished_) WaitForChildren();
  });
}

void Supervisor::Reap() {
  // Signals coalesce: one SIGCHLD may stand for several exits. Only our own
  // children are waited for; other parts of the process may have theirs.
  std::vector<RankExit> ended;
  for (auto it = live_.begin(); it != live_.end();) {
    int status = 0;
    pid_t r = ::waitpid(it->first, &status, WNOHANG);
    if (r == it->first && (WIFEXITED(status) || WIFSIGNALED(status))) {
      ended.push_back(RankExitFromWaitStatus(it->second, status));
      it = live_.erase(it);
    } else {
      ++it;
    }
  }
  for (const RankExit& e : ended) Record(e);
}

void Supervisor::Record(RankExit e) {
  e.after_stop = terminating_;
  if (auto path = log_paths_.find(e.rank); path != log_paths_.end())
    log_times_.Note(path->second, UnixMillisNow());  // its last words' time
  if (e.exit_code == 0) {
    spdlog::info("rank {} exited 0", e.rank);
  } else {
    AttachLogEvidence(&e);
    spdlog::warn("rank {} {}{}{}", e.rank, DescribeRankExit(e),
                 e.markers.empty() ? "" : " [" + absl::StrJoin(e.markers, ",") + "]",
                 e.evidence.empty() ? "" : ": " + e.evidence);
  }
  exits_.push_back(e);
  on_rank_exit_(e);
  if (e.exit_code != 0 && !live_.empty() && !terminating_) {
    spdlog::warn("stopping the {} other rank(s)", live_.size());
    Terminate();
  }
  if (live_.empty() && static_cast<int>(exits_.size()) >= expected_ && !finished_) {
    finished_ = true;
    kill_timer_.Cancel();
    notes_timer_.Cancel();
    boost::system::error_code ignored;
    sigchld_.cancel(ignored);
    asio::post(io_, [this] { on_all_exited_(); });
  }
}

// The rank's last words, read as it is reaped: the controller classifies the
// failure and weighs blame on the node with them (docs/architecture.md, "A
// run's life, as implemented"). 16 KiB of a local or shared log, once per
// failed rank, is cheap enough for the event loop.
void Supervisor::AttachLogEvidence(RankExit* e) const {
  auto path = log_paths_.find(e->rank);
  if (path == log_paths_.end()) return;
  auto tail = ReadFileTail(path->second, kRankLogTailBytes);
  if (!tail.ok()) {
    spdlog::warn("rank {}: no log evidence: {}", e->rank, std::string(tail.status().message()));
    return;
  }
  LogEvidence evidence = ScanLogTail(*tail);
  e->markers = std::move(evidence.markers);
  e->evidence = std::move(evidence.line);
}

void Supervisor::Stop(const std::string& cause) {
  if (stop_cause_.empty()) stop_cause_ = cause;
  if (terminating_ || finished_) return;
  spdlog::warn("{}: stopping {} rank(s)", cause, live_.size());
  Terminate();
}

void Supervisor::Terminate() {
  terminating_ = true;
  Forward(SIGTERM);
  kill_timer_.Arm(kill_grace_, [this] {
    if (!live_.empty())
      spdlog::warn("{} rank(s) still running after the grace; sending SIGKILL", live_.size());
    Forward(SIGKILL);
  });
}

std::map<int, char> Supervisor::RankStates() const {
  std::map<int, char> out;
  for (const auto& [pid, rank] : live_)
    if (char state = ProcessState(pid); state != 0) out[rank] = state;
  return out;
}

void Supervisor::Forward(int signal) {
  for (const auto& [pid, rank] : live_) {
    // The pid is not reaped yet, so its group id cannot have been reused.
    if (::killpg(pid, signal) != 0 && errno != ESRCH)
      spdlog::warn("cannot send signal {} to rank {}: {}", signal, rank, strerror(errno));
  }
}

}  // namespace trellis::worker
