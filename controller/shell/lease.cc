#include "controller/shell/lease.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/atomic_file.h"
#include "common/auth.h"
#include "common/log.h"

namespace trellis::controller {
namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct LeaseFile {
  LeaseFound found;
  std::string text;  // as read, to tell whether it changed
};

LeaseFile ReadLeaseFile(const std::string& path, const std::string& my_host) {
  LeaseFile f;
  std::ifstream in(path);
  if (!in) return f;  // absent (or unreadable: the create below says why)
  std::stringstream text;
  text << in.rdbuf();
  f.text = text.str();
  f.found.exists = true;
  auto holder = ParseLease(f.text);
  if (holder.ok()) f.found.holder = *holder;
  if (holder.ok() && holder->host == my_host && holder->pid > 0)
    f.found.holder_pid_alive = kill(static_cast<pid_t>(holder->pid), 0) == 0 || errno == EPERM;
  return f;
}

// Creates the lease file only if there is none (O_EXCL, atomic on NFS v3+
// and Lustre). False when another controller created it first.
absl::StatusOr<bool> CreateExclusive(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    return absl::FailedPreconditionError("cannot create the lease " + path + ": " +
                                         std::strerror(errno));
  }
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            fsync(fd) == 0;
  int err = errno;
  close(fd);
  if (!ok) {
    unlink(path.c_str());
    return absl::FailedPreconditionError("cannot write the lease " + path + ": " +
                                         std::strerror(err));
  }
  return true;
}

absl::Status Refused(const std::string& path, const LeaseHolder& h) {
  return absl::AlreadyExistsError(
      "another controller holds the state directory (" + path + ": " +
      DescribeHolder(h, UnixNow()) +
      "); stop it first, or start this one once its lease has expired (" +
      std::to_string(h.ttl_s) + " s after its last renewal)");
}

}  // namespace

StateLease::StateLease(LeaseOptions options, LeaseHolder me)
    : options_(std::move(options)), me_(std::move(me)) {
  MarkRenewed(SteadyClock::now());
}

absl::StatusOr<std::unique_ptr<StateLease>> StateLease::Acquire(
    const LeaseOptions& options, std::string* said,
    const std::function<void(const std::string&)>& on_wait) {
  LeaseHolder me{options.host, getpid(), auth::RandomSecretHex(), options.version, UnixNow(),
                 UnixNow(), options.ttl.count()};
  for (int attempt = 0; attempt < 3; ++attempt) {
    LeaseFile f = ReadLeaseFile(options.path, options.host);
    LeaseVerdict verdict = JudgeLease(f.found, options.host, UnixNow());
    if (verdict == LeaseVerdict::kLive) return Refused(options.path, *f.found.holder);
    if (verdict == LeaseVerdict::kFree) {
      me.renewed_unix = UnixNow();
      auto created = CreateExclusive(options.path, FormatLease(me));
      if (!created.ok()) return created.status();
      if (!*created) continue;  // another controller was quicker: judge its lease
      *said = "lease " + options.path + " taken (it was free)";
      return std::unique_ptr<StateLease>(new StateLease(options, me));
    }
    std::string previous = f.found.holder ? DescribeHolder(*f.found.holder, UnixNow())
                                          : "a file that is not a lease";
    if (verdict == LeaseVerdict::kWatch) {
      if (on_wait)
        on_wait("lease " + options.path + " held by " + previous +
                " looks expired; watching it " + std::to_string(options.ttl.count()) +
                " s before taking it over");
      std::this_thread::sleep_for(options.ttl);
      LeaseFile again = ReadLeaseFile(options.path, options.host);
      // Renewed meanwhile: its holder is alive, its clock behind ours.
      if (again.text != f.text && again.found.holder)
        return Refused(options.path, *again.found.holder);
      if (again.text != f.text) continue;
    }
    // Renewed as of now, not of the start: the watch took a ttl.
    me.renewed_unix = UnixNow();
    if (absl::Status st = WriteFileAtomically(options.path, FormatLease(me), 0644); !st.ok())
      return st;
    std::this_thread::sleep_for(options.settle);
    LeaseFile back = ReadLeaseFile(options.path, options.host);
    if (!back.found.holder || back.found.holder->token != me.token) {
      if (back.found.holder) return Refused(options.path, *back.found.holder);
      continue;
    }
    *said = "lease " + options.path + " taken over from " + previous;
    return std::unique_ptr<StateLease>(new StateLease(options, me));
  }
  return absl::AlreadyExistsError("the lease " + options.path +
                                  " kept changing while this controller tried to take it");
}

StateLease::~StateLease() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (lost_) return;
  LeaseFile f = ReadLeaseFile(options_.path, options_.host);
  if (f.found.holder && f.found.holder->token == me_.token) unlink(options_.path.c_str());
}

void StateLease::MarkRenewed(SteadyClock::time_point at) {
  // A margin of a second (or a tenth of a short ttl) below the ttl: the
  // writes stop before a successor on this host may take over.
  auto margin = std::min<SteadyClock::duration>(
      std::chrono::seconds(1), std::chrono::milliseconds(options_.ttl) / 10);
  valid_until_ns_ = (at + options_.ttl - margin).time_since_epoch().count();
}

bool StateLease::Held() const {
  return !lost_ && SteadyClock::now().time_since_epoch().count() < valid_until_ns_;
}

bool StateLease::RenewOnce(std::string* lost_why) {
  const auto started = SteadyClock::now();
  LeaseFile f = ReadLeaseFile(options_.path, options_.host);
  if (!f.found.holder || f.found.holder->token != me_.token) {
    *lost_why = f.found.holder ? "the lease " + options_.path + " is now held by " +
                                     DescribeHolder(*f.found.holder, UnixNow())
                               : "the lease " + options_.path + " is gone or not a lease";
    return false;
  }
  LeaseHolder renewed = me_;
  renewed.renewed_unix = UnixNow();
  if (absl::Status st = WriteFileAtomically(options_.path, FormatLease(renewed), 0644); !st.ok()) {
    spdlog::warn("cannot renew the lease: {} (writes stop {} s after the last renewal)",
                 std::string(st.message()), options_.ttl.count());
    return true;
  }
  MarkRenewed(started);
  return true;
}

void StateLease::StartRenewing(std::function<void(const std::string&)> on_lost) {
  on_lost_ = std::move(on_lost);
  thread_ = std::thread([this] { RenewLoop(); });
}

void StateLease::RenewLoop() {
  const auto every = std::chrono::duration_cast<std::chrono::milliseconds>(options_.ttl) / 3;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, every, [&] { return stopping_; })) {
    lock.unlock();
    std::string why;
    bool held = RenewOnce(&why);
    lock.lock();
    if (!held) {
      lost_ = true;
      spdlog::error("this controller lost its state directory: {}; it stops writing and exits",
                    why);
      if (on_lost_) on_lost_(why);
      return;
    }
  }
}

}  // namespace trellis::controller
