#include "controller/rpc/log_reactor.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <filesystem>

#include <sys/stat.h>

#include "controller/rpc/controller_service.h"
#include "controller/rpc/app_proto.h"
#include "controller/rpc/log_files.h"

namespace trellis::controller {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {
constexpr size_t kChunkBytes = 64 * 1024;
constexpr auto kPollInterval = std::chrono::milliseconds(300);

// What was appended to <log>.times since `*read` bytes of it.
void ReadNewLogTimeNotes(const std::string& log_path, std::vector<LogTimeNote>* notes,
                         size_t* read) {
  std::ifstream in(LogTimesPath(log_path), std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(*read));
  std::string text{std::istreambuf_iterator<char>(in), {}};
  size_t consumed = 0;
  std::vector<LogTimeNote> more = ParseLogTimeNotes(text, &consumed);
  for (const LogTimeNote& n : more)
    if (notes->empty() || n.bytes >= notes->back().bytes) notes->push_back(n);
  *read += consumed;
}

// The file's last write, in Unix milliseconds; -1 when it cannot be read.
int64_t LastWriteMillis(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

// A note may fall inside a line: --since starts at that line's beginning (the
// line was still being written then), looking back at most 64 KiB.
uint64_t LineStartAtOrBefore(const std::string& path, uint64_t offset) {
  if (offset == 0) return 0;
  const uint64_t from = offset > 65536 ? offset - 65536 : 0;
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(from));
  std::string back(offset - from, '\0');
  in.read(back.data(), static_cast<std::streamsize>(back.size()));
  back.resize(static_cast<size_t>(in.gcount()));
  const size_t nl = back.rfind('\n');
  if (nl != std::string::npos) return from + nl + 1;
  return from == 0 ? 0 : offset;
}

uint64_t FileBytes(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
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
    files_.push_back({f.rank, f.path, 0, "", {}, 0});
    files_.back().offset = StartOffset(files_.back());
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

uint64_t LogReactor::StartOffset(RankFile& f) const {
  if (read_once_) return 0;  // a file that appeared since: all of it is new
  uint64_t start = request_.tail_lines() > 0 ? TailOffset(f.path, request_.tail_lines()) : 0;
  if (const int64_t since = request_.since_unix_ms(); since > 0) {
    ReadNewLogTimeNotes(f.path, &f.notes, &f.times_read);
    // A log without times is all in when it was written to since, else out.
    const uint64_t from = !f.notes.empty()               ? LogOffsetSince(f.notes, since)
                          : LastWriteMillis(f.path) >= since ? 0
                                                             : FileBytes(f.path);
    start = std::max(start, LineStartAtOrBefore(f.path, from));
  }
  return start;
}

std::string LogReactor::LinePrefix(const RankFile& f, uint64_t end) const {
  std::string out;
  if (request_.timestamps()) {
    int64_t t = LogTimeOf(f.notes, end);
    // Past the last note: written since, by the file's last write at the latest.
    if (t < 0 && f.times_read > 0) t = LastWriteMillis(f.path);
    out += t < 0 ? "-                       " : FormatUtcMillis(t) + " ";
  }
  if (request_.rank() < 0 || request_.batch_script())
    out += f.rank < 0 ? "[batch] " : "[rank " + std::to_string(f.rank) + "] ";
  return out;
}

bool LogReactor::ReadNew() {
  // Every rank's lines, or the batch script's, carry where they come from;
  // with --timestamps each its time: then the output goes line by line.
  const bool by_line =
      request_.rank() < 0 || request_.batch_script() || request_.timestamps();
  bool any = false;
  for (auto& f : files_) {
    std::ifstream in(f.path, std::ios::binary);
    if (!in) continue;
    in.seekg(static_cast<std::streamoff>(f.offset));
    std::string buf(kChunkBytes, '\0');
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    buf.resize(static_cast<size_t>(in.gcount()));
    if (buf.empty()) continue;
    if (request_.timestamps()) ReadNewLogTimeNotes(f.path, &f.notes, &f.times_read);
    const uint64_t partial_start = f.offset - f.partial.size();
    f.offset += buf.size();
    std::string data;
    if (!by_line) {
      data = std::move(buf);
    } else {
      f.partial += buf;
      size_t start = 0;
      for (size_t nl = f.partial.find('\n'); nl != std::string::npos;
           nl = f.partial.find('\n', start)) {
        data += LinePrefix(f, partial_start + nl + 1) + f.partial.substr(start, nl - start + 1);
        start = nl + 1;
      }
      const uint64_t rest_start = partial_start + start;
      f.partial.erase(0, start);
      // Flush an unterminated tail once the run is over.
      if (run_terminal_ && !f.partial.empty() && in.eof()) {
        data += LinePrefix(f, rest_start + f.partial.size()) + f.partial + "\n";
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
