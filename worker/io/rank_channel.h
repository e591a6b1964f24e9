#pragma once
// The local rank channel: one unix stream socket per rank, so the rank is
// known from the socket it wrote to, never trusted from the payload. A rank
// (any language) connects, writes newline-delimited JSON step records, and
// may reconnect. Bad and oversized lines are counted and logged (rate
// limited); they never stop the worker.
//
// Runs on the caller's io_context; destroy it only after that loop stopped.
// Time (the drain's bound, the log's rate limit) comes from the caller's Clock.

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "common/clock.h"
#include "common/loop_timer.h"
#include "common/step_record.h"

namespace trellis::worker {

class RankChannel {
 public:
  using RecordFn = std::function<void(int rank, const StepRecord& record)>;

  struct Stats {
    uint64_t records = 0;
    uint64_t bad_lines = 0;  // includes oversized lines
    uint64_t oversized_lines = 0;
    uint64_t connections = 0;
  };

  RankChannel(boost::asio::io_context& io, Clock& clock, RecordFn on_record,
              std::chrono::steady_clock::duration log_interval = std::chrono::seconds(10));
  ~RankChannel();
  RankChannel(const RankChannel&) = delete;
  RankChannel& operator=(const RankChannel&) = delete;

  // Binds and listens on `path` for `rank` (an old file at path is replaced).
  absl::Status Listen(int rank, const std::string& path);

  // Stops accepting; connections still open are read to their end. `done`
  // runs on the loop once none is open, or after `bound` (a rank's child may
  // keep a copy of the socket open).
  void Drain(std::chrono::steady_clock::duration bound, std::function<void()> done);

  Stats stats() const { return stats_; }
  Stats stats(int rank) const;
  int open_connections() const { return static_cast<int>(connections_.size()); }

 private:
  struct Connection;
  using Acceptor = boost::asio::local::stream_protocol::acceptor;

  void Accept(int rank, Acceptor* acceptor);
  void Read(const std::shared_ptr<Connection>& c);
  void HandleLine(int rank, const std::string& line, bool oversized);
  void Closed(const std::shared_ptr<Connection>& c);
  void MaybeDrained();

  boost::asio::io_context& io_;
  Clock& clock_;
  RecordFn on_record_;
  std::chrono::steady_clock::duration log_interval_;
  std::map<int, std::unique_ptr<Acceptor>> acceptors_;
  std::set<std::shared_ptr<Connection>> connections_;
  Stats stats_;
  std::map<int, Stats> per_rank_;
  std::map<int, std::chrono::steady_clock::time_point> last_log_;
  std::map<int, uint64_t> unlogged_;
  std::function<void()> drained_;
  LoopTimer drain_timer_;
  bool closing_ = false;
};

}  // namespace trellis::worker
