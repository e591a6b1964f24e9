#pragma once
// Where the worker dials the controller, and following it when it moves
// (docs/architecture.md, "A controller that outlives its login node"): a
// controller that took over on another host writes its address to
// <state dir>/controller.address (common/controller_address.h). While the
// channel cannot connect, the link reads that file again and, when it names
// another address, dials that one instead. Every call takes the link's
// current stub, so a call made after a switch goes to the new address, and
// one in flight keeps the stub (and channel) it started on. Thread-safe.
// Its waits are real time, as gRPC's own are.

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "trellis/v1/agent.grpc.pb.h"
#include "worker/core/args.h"

namespace trellis::worker {

// While the controller is unreachable the file is read again this often, at
// most (thousands of workers poll it on a shared file system), and no wait
// on a channel lasts longer before it is.
inline constexpr Seconds kLinkPoll{1};

class ControllerLink {
 public:
  // `address`: --controller. `controller_file` empty: that address for good.
  // Otherwise a readable, valid file names the address from the start.
  ControllerLink(std::string address, std::string controller_file,
                 std::shared_ptr<grpc::ChannelCredentials> credentials);
  // One channel that never moves: no file to follow.
  explicit ControllerLink(std::shared_ptr<grpc::Channel> channel);
  ControllerLink(const ControllerLink&) = delete;
  ControllerLink& operator=(const ControllerLink&) = delete;

  // Waits up to `limit` for the current channel to connect, in slices of at
  // most kLinkPoll; after a slice that ends unconnected it reads the file
  // again (at most every kLinkPoll) and switches when it names another
  // address. True once connected.
  bool WaitConnected(Seconds limit);
  // Reads the file now; true when it named another address and the link
  // switched to it. A missing, unreadable or invalid file changes nothing.
  bool Refresh();

  std::string address() const;
  std::shared_ptr<grpc::Channel> channel() const;
  std::shared_ptr<v1::AgentService::Stub> stub() const;

 private:
  void SwitchLocked(const std::string& address);
  // Logs a failed read once per distinct error, not on every poll.
  void ReportReadLocked(const absl::Status& st);

  const std::string file_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;

  std::mutex read_mu_;  // one read of the file at a time, applied in order
  mutable std::mutex mu_;
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<v1::AgentService::Stub> stub_;
  std::chrono::steady_clock::time_point last_read_;
  std::string last_error_;  // of the last read, "" after a good one
};

// A channel to HOST:PORT, TLS when `credentials` say so (the per-attempt
// secret authenticates the worker either way).
std::shared_ptr<grpc::Channel> ControllerChannel(
    const std::string& address,
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials());

}  // namespace trellis::worker
