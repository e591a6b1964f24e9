#include "controller/rpc/log_reactor.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <filesystem>

#include "controller/rpc/controller_service.h"
#include "controller/rpc/app_proto.h"

namespace trellis::controller {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {
constexpr size_t kChunkBytes = 64 * 1024;
constexpr auto kPollInterval = std::chrono::milliseconds(300);

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
}  // namespace

LogReactor::LogReactor(Controller* controller, v1::ReadLogsRequest request,
                       std::optional<std::string> only_user)
    : controller_(controller),
      request_(std::move(request)),
      only_user_(std::move(only_user)),
      timer_(controller->clock(), [controller](std::function<void()> fn) {
        asio::post(controller->io(), std::move(fn));
      }) {
  controller_->GetRun(request_.run_id(), [this](absl::StatusOr<RunView> v) { OnRun(std::move(v)); });
}

void LogReactor::FindFiles(const RunView& view) {
  int attempt = request_.attempt() > 0 ? request_.attempt()
                                       : (view.attempts.empty() ? 0 : view.attempts.back().attempt);
  std::string attempt_dir = view.run.run_dir + "/attempt-" + std::to_string(attempt);
  int launch = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(attempt_dir, ec))
    launch = std::max(launch, NumberAfter(e.path().filename().string(), "launch-"));
  if (launch < 0) return;
  std::string dir = attempt_dir + "/launch-" + std::to_string(launch);
  if (dir == launch_dir_) {
    // Same launch: add rank files that appeared since.
  } else {
    launch_dir_ = dir;
    files_.clear();
  }
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    int rank = NumberAfter(e.path().filename().string(), "rank-");
    if (rank < 0 || (request_.rank() >= 0 && rank != request_.rank())) continue;
    bool known = std::any_of(files_.begin(), files_.end(),
                             [&](const RankFile& f) { return f.rank == rank; });
    if (!known) files_.push_back({rank, e.path().string(), 0, ""});
  }
  std::sort(files_.begin(), files_.end(),
            [](const RankFile& a, const RankFile& b) { return a.rank < b.rank; });
}

void LogReactor::OnRun(absl::StatusOr<RunView> view) {
  if (finished_) return;
  if (!view.ok()) return FinishOnce(ToGrpc(view.status()));
  if (only_user_ && view->run.user != *only_user_)
    return FinishOnce(NotYours(request_.run_id(), Caller{*only_user_, false}));
  run_terminal_ = IsTerminal(view->run.state);
  FindFiles(*view);
  if (files_.empty() && !request_.follow()) {
    return FinishOnce(grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        "no rank logs yet for run " + request_.run_id() +
            (request_.rank() >= 0 ? " rank " + std::to_string(request_.rank()) : "")));
  }
  if (ReadNew()) return Pump();
  if (!request_.follow() || run_terminal_) return FinishOnce(grpc::Status::OK);
  timer_.Arm(kPollInterval, [this] { Tick(); });
}

void LogReactor::Tick() {
  if (finished_) return;
  controller_->GetRun(request_.run_id(), [this](absl::StatusOr<RunView> v) { OnRun(std::move(v)); });
}

bool LogReactor::ReadNew() {
  bool prefixed = request_.rank() < 0;
  bool any = false;
  for (auto& f : files_) {
    std::ifstream in(f.path, std::ios::binary);
    if (!in) continue;
    in.seekg(static_cast<std::streamoff>(f.offset));
    std::string buf(kChunkBytes, '\0');
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    buf.resize(static_cast<size_t>(in.gcount()));
    if (buf.empty()) continue;
    f.offset += buf.size();
    std::string data;
    if (!prefixed) {
      data = std::move(buf);
    } else {
      f.partial += buf;
      size_t start = 0;
      for (size_t nl = f.partial.find('\n'); nl != std::string::npos;
           nl = f.partial.find('\n', start)) {
        data += "[rank " + std::to_string(f.rank) + "] " + f.partial.substr(start, nl - start + 1);
        start = nl + 1;
      }
      f.partial.erase(0, start);
      // Flush an unterminated tail once the run is over.
      if (run_terminal_ && !f.partial.empty() && in.eof()) {
        data += "[rank " + std::to_string(f.rank) + "] " + f.partial + "\n";
        f.partial.clear();
      }
    }
    if (data.empty()) continue;
    v1::LogChunk c;
    c.set_rank(f.rank);
    c.set_data(std::move(data));
    queue_.push_back(std::move(c));
    any = true;
  }
  return any;
}

void LogReactor::Pump() {
  if (finished_ || in_flight_) return;
  if (queue_.empty()) return Tick();
  writing_ = std::move(queue_.front());
  queue_.pop_front();
  in_flight_ = true;
  StartWrite(&writing_);
}

void LogReactor::FinishOnce(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  timer_.Cancel();
  Finish(status);
}

void LogReactor::OnWriteDone(bool ok) {
  asio::post(controller_->io(), [this, ok] {
    in_flight_ = false;
    if (!ok) return FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
    Pump();
  });
}

void LogReactor::OnCancel() {
  asio::post(controller_->io(), [this] {
    if (!in_flight_) FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  });
}

void LogReactor::OnDone() {
  asio::post(controller_->io(), [this] {
    timer_.Cancel();
    delete this;
  });
}

}  // namespace trellis::controller
