#include "worker/io/rank_channel.h"

#include <unistd.h>

#include <array>
#include <boost/asio/post.hpp>

#include "common/log.h"
#include "worker/core/line_splitter.h"

namespace trellis::worker {

namespace asio = boost::asio;
using asio::local::stream_protocol;

struct RankChannel::Connection {
  Connection(asio::io_context& io, int rank)
      : socket(io), rank(rank), splitter(kMaxStepRecordBytes) {}
  stream_protocol::socket socket;
  int rank;
  LineSplitter splitter;
  std::array<char, 8192> buf;
};

RankChannel::RankChannel(asio::io_context& io, Clock& clock, RecordFn on_record,
                         std::chrono::steady_clock::duration log_interval)
    : io_(io),
      clock_(clock),
      on_record_(std::move(on_record)),
      log_interval_(log_interval),
      drain_timer_(clock, [&io](std::function<void()> fn) { asio::post(io, std::move(fn)); }) {}

RankChannel::~RankChannel() {
  closing_ = true;
  boost::system::error_code ec;
  for (auto& [rank, acceptor] : acceptors_) acceptor->close(ec);
  for (const auto& c : connections_) c->socket.close(ec);
  drain_timer_.Cancel();
}

absl::Status RankChannel::Listen(int rank, const std::string& path) {
  if (acceptors_.count(rank) != 0)
    return absl::AlreadyExistsError("rank " + std::to_string(rank) + " already has a socket");
  ::unlink(path.c_str());
  auto acceptor = std::make_unique<Acceptor>(io_);
  boost::system::error_code ec;
  acceptor->open(stream_protocol(), ec);
  if (!ec) acceptor->bind(stream_protocol::endpoint(path), ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return absl::InternalError("cannot listen on " + path + ": " + ec.message());
  Acceptor* raw = acceptor.get();
  acceptors_[rank] = std::move(acceptor);
  Accept(rank, raw);
  return absl::OkStatus();
}

void RankChannel::Accept(int rank, Acceptor* acceptor) {
  auto c = std::make_shared<Connection>(io_, rank);
  acceptor->async_accept(c->socket, [this, c, rank, acceptor](boost::system::error_code ec) {
    if (ec == asio::error::operation_aborted || closing_) return;
    if (!ec) {
      ++stats_.connections;
      ++per_rank_[rank].connections;
      connections_.insert(c);
      Read(c);
    } else {
      spdlog::warn("rank {} step socket: accept failed: {}", rank, ec.message());
    }
    Accept(rank, acceptor);
  });
}

void RankChannel::Read(const std::shared_ptr<Connection>& c) {
  c->socket.async_read_some(
      asio::buffer(c->buf), [this, c](boost::system::error_code ec, size_t n) {
        if (ec == asio::error::operation_aborted) return;
        if (n > 0) {
          for (const LineEvent& e : c->splitter.Feed(std::string_view(c->buf.data(), n)))
            HandleLine(c->rank, e.text, e.kind == LineEvent::kOversized);
        }
        if (ec) {
          for (const LineEvent& e : c->splitter.Finish())
            HandleLine(c->rank, e.text, e.kind == LineEvent::kOversized);
          Closed(c);
          return;
        }
        Read(c);
      });
}

void RankChannel::HandleLine(int rank, const std::string& line, bool oversized) {
  std::string error;
  std::optional<StepRecord> record;
  if (oversized) {
    error = "line longer than " + std::to_string(kMaxStepRecordBytes) + " bytes, discarded";
  } else {
    record = DecodeStepRecord(line, &error);
  }
  if (record) {
    ++stats_.records;
    ++per_rank_[rank].records;
    on_record_(rank, *record);
    return;
  }
  ++stats_.bad_lines;
  ++per_rank_[rank].bad_lines;
  if (oversized) {
    ++stats_.oversized_lines;
    ++per_rank_[rank].oversized_lines;
  }
  // A rank stuck in a loop of bad writes must not flood the worker's log.
  SteadyTime now = clock_.SteadyNow();
  auto last = last_log_.find(rank);
  if (last != last_log_.end() && now - last->second < log_interval_) {
    ++unlogged_[rank];
    return;
  }
  last_log_[rank] = now;
  uint64_t skipped = std::exchange(unlogged_[rank], 0);
  spdlog::warn("rank {}: bad step record ({}){}", rank, error,
               skipped > 0 ? " (+" + std::to_string(skipped) + " more not logged)" : "");
}

void RankChannel::Closed(const std::shared_ptr<Connection>& c) {
  boost::system::error_code ignored;
  c->socket.close(ignored);
  connections_.erase(c);
  MaybeDrained();
}

void RankChannel::Drain(std::chrono::steady_clock::duration bound, std::function<void()> done) {
  // A rank may have connected, written and exited before its connection was
  // accepted: take what is waiting in the backlog before closing.
  for (auto& [rank, acceptor] : acceptors_) {
    boost::system::error_code ec;
    acceptor->cancel(ec);
    acceptor->non_blocking(true, ec);
    while (!ec) {
      auto c = std::make_shared<Connection>(io_, rank);
      acceptor->accept(c->socket, ec);
      if (ec) break;
      ++stats_.connections;
      ++per_rank_[rank].connections;
      connections_.insert(c);
      Read(c);
    }
    acceptor->close(ec);
  }
  drained_ = std::move(done);
  drain_timer_.Arm(bound, [this] {
    if (!drained_) return;
    spdlog::info("{} step socket connection(s) still open after the ranks exited; not waiting",
                 connections_.size());
    std::exchange(drained_, nullptr)();
  });
  MaybeDrained();
}

void RankChannel::MaybeDrained() {
  if (!drained_ || !connections_.empty()) return;
  drain_timer_.Cancel();
  // Posted, so `done` never runs inside Drain's caller.
  asio::post(io_, [done = std::exchange(drained_, nullptr)] { done(); });
}

RankChannel::Stats RankChannel::stats(int rank) const {
  auto it = per_rank_.find(rank);
  return it == per_rank_.end() ? Stats{} : it->second;
}

}  // namespace trellis::worker
