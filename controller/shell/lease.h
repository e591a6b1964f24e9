#pragma once
// The state directory's lease (docs/architecture.md, "A controller that
// outlives its login node"): one controller acts on a state directory at a
// time, wherever it runs. The lease is a file there, taken atomically
// (O_EXCL when free, rename over a stale one, then read back), renewed every
// ttl/3 by a thread, and checked before every write of the store (Held(),
// through the database's commit hook). A controller that finds its lease
// taken stops. lease_rules.h judges what a starting controller finds.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "controller/shell/lease_rules.h"

namespace trellis::controller {

struct LeaseOptions {
  std::string path;  // <state dir>/controller.lease
  std::string host;  // this host's name
  std::string version;
  std::chrono::seconds ttl{15};
  // After taking a stale lease: how long before reading it back, so that of
  // two controllers taking it at once only the last writer goes on.
  std::chrono::milliseconds settle{1000};
};

class StateLease {
 public:
  // Takes the lease. ALREADY_EXISTS naming the holder while another
  // controller holds it (or won a race for it); FAILED_PRECONDITION when the
  // file cannot be written. A lease held elsewhere that
  // looks expired is watched for a ttl first (`on_wait` says so), since the
  // hosts' clocks may disagree. `said`: how it was taken, for the log.
  static absl::StatusOr<std::unique_ptr<StateLease>> Acquire(
      const LeaseOptions& options, std::string* said,
      const std::function<void(const std::string&)>& on_wait = nullptr);
  // Stops renewing and removes the file if it is still this controller's.
  ~StateLease();
  StateLease(const StateLease&) = delete;
  StateLease& operator=(const StateLease&) = delete;

  // Renews every ttl/3 on a thread of its own; `on_lost` is called once,
  // from it, when the file names another holder.
  void StartRenewing(std::function<void(const std::string& why)> on_lost);
  // Whether this controller may still write: not lost, and renewed within
  // ttl less a margin (a controller that could not renew stops writing
  // before anyone may take over). Thread-safe and cheap: no I/O.
  bool Held() const;
  bool lost() const { return lost_; }
  const LeaseHolder& holder() const { return me_; }

 private:
  StateLease(LeaseOptions options, LeaseHolder me);
  void RenewLoop();
  bool RenewOnce(std::string* lost_why);
  void MarkRenewed(std::chrono::steady_clock::time_point at);

  LeaseOptions options_;
  LeaseHolder me_;
  std::atomic<int64_t> valid_until_ns_{0};  // steady clock
  std::atomic<bool> lost_{false};
  std::function<void(const std::string&)> on_lost_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace trellis::controller
