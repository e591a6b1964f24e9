#pragma once
// Supervises the node's ranks on the worker's event loop: reaps them on
// SIGCHLD; when one fails (non-zero exit or signal), or the worker is told to
// stop, sends SIGTERM to every rank's process group and SIGKILL to those left
// after the grace. A rank that exits non-zero gets the failure markers and
// the evidence line of the end of its log (ScanLogTail) before it is reported.
//
// Runs on the caller's io_context; destroy it only after that loop stopped.
// The kill grace is timed by the caller's Clock (a FakeClock in tests). Each
// rank log's growth is noted about once a second in <log>.times
// (common/log_times.h), for `trellis logs --since` and `--timestamps`.

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/loop_timer.h"
#include "worker/core/outcome.h"
#include "worker/io/log_times_writer.h"
#include "worker/core/rank_layout.h"

namespace trellis::worker {

class Supervisor {
 public:
  using ExitFn = std::function<void(const RankExit&)>;

  // on_rank_exit runs once per rank (with the log evidence of a failure);
  // on_all_exited once, after the last one.
  Supervisor(boost::asio::io_context& io, Clock& clock,
             std::chrono::steady_clock::duration kill_grace, ExitFn on_rank_exit,
             std::function<void()> on_all_exited);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts one process per plan. A rank that cannot be started counts as
  // exited with 127, which stops the others like any failure.
  void Start(const std::vector<RankPlan>& plans, const std::vector<std::string>& argv,
             const std::string& working_dir);

  // SIGTERM to all ranks, SIGKILL after the grace. `cause` ends up in the
  // outcome's reason. Repeated calls keep the first cause and the first grace.
  void Stop(const std::string& cause);

  // Passes a signal on to every live rank's process group (e.g. SIGUSR1).
  void Forward(int signal);

  int expected() const { return expected_; }
  int alive() const { return static_cast<int>(live_.size()); }
  // Each live rank's process state (rank_process.h), by global rank.
  std::map<int, char> RankStates() const;
  const std::vector<RankExit>& exits() const { return exits_; }
  const std::string& stop_cause() const { return stop_cause_; }

 private:
  void WaitForChildren();
  void Reap();
  void Record(RankExit e);
  void Terminate();
  void AttachLogEvidence(RankExit* e) const;
  void NoteLogTimes();  // and again in a second while ranks live

  boost::asio::io_context& io_;
  std::chrono::steady_clock::duration kill_grace_;
  ExitFn on_rank_exit_;
  std::function<void()> on_all_exited_;
  boost::asio::signal_set sigchld_;
  LoopTimer kill_timer_;
  LoopTimer notes_timer_;
  LogTimesWriter log_times_;
  std::map<pid_t, int> live_;             // pid (= process group) -> global rank
  std::map<int, std::string> log_paths_;  // global rank -> its log
  std::vector<RankExit> exits_;
  std::string stop_cause_;
  int expected_ = 0;
  bool terminating_ = false;
  bool finished_ = false;
};

}  // namespace trellis::worker
