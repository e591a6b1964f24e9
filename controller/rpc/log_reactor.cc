#include "controller/rpc/log_reactor.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <filesystem>

#include "controller/rpc/controller_service.h"
#include "controller/rpc/app_proto.h"
#include "controller/rpc/log_files.h"

namespace trellis::controller {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {
constexpr size_t kChunkBytes = 64 * 1024;
constexpr auto kPollInterval = std::chrono::milliseconds(300);
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

absl::Status LogReactor::FindFiles(const RunView& view) {
  auto found = FindLogFiles(view, request_);
  if (!found.ok()) return found.status();
  if (found->dir != launch_dir_) {
    launch_dir_ = found->dir;
    files_.clear();
  }
  // Files that appeared since are added; those known keep their offsets.
  for (const LogFile& f : found->files) {
    bool known = std::any_of(files_.begin(), files_.end(),
                             [&](const RankFile& r) { return r.path == f.path; });
    if (known) continue;
    const uint64_t start =
        request_.tail_lines() > 0 && !read_once_ ? TailOffset(f.path, request_.tail_lines()) : 0;
    files_.push_back({f.rank, f.path, start, ""});
  }
  std::sort(files_.begin(), files_.end(),
            [](const RankFile& a, const RankFile& b) { return a.rank < b.rank; });
  return absl::OkStatus();
}

void LogReactor::OnRun(absl::StatusOr<RunView> view) {
  if (finished_) return;
  if (!view.ok()) return FinishOnce(ToGrpc(view.status()));
  if (only_user_ && view->run.user != *only_user_)
    return FinishOnce(NotYours(request_.run_id(), Caller{*only_user_, false}));
  run_terminal_ = IsTerminal(view->run.state);
  if (absl::Status st = FindFiles(*view); !st.ok()) return FinishOnce(ToGrpc(st));
  if (files_.empty() && !request_.follow()) {
    return FinishOnce(grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        std::string(request_.batch_script() ? "no batch script output yet" : "no rank logs yet") +
            " for run " + request_.run_id() +
            (request_.rank() >= 0 ? " rank " + std::to_string(request_.rank()) : "") +
            (request_.node().empty() ? "" : " on " + request_.node())));
  }
  read_once_ = true;
  if (ReadNew()) return Pump();
  if (!request_.follow() || run_terminal_) return FinishOnce(grpc::Status::OK);
  timer_.Arm(kPollInterval, [this] { Tick(); });
}

void LogReactor::Tick() {
  if (finished_) return;
  controller_->GetRun(request_.run_id(), [this](absl::StatusOr<RunView> v) { OnRun(std::move(v)); });
}

std::string LogReactor::Prefix(int rank) {
  return rank < 0 ? "[batch] " : "[rank " + std::to_string(rank) + "] ";
}

bool LogReactor::ReadNew() {
  // Every rank's lines, or the batch script's, carry where they come from.
  const bool prefixed = request_.rank() < 0 || request_.batch_script();
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
        data += Prefix(f.rank) + f.partial.substr(start, nl - start + 1);
        start = nl + 1;
      }
      f.partial.erase(0, start);
      // Flush an unterminated tail once the run is over.
      if (run_terminal_ && !f.partial.empty() && in.eof()) {
        data += Prefix(f.rank) + f.partial + "\n";
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
