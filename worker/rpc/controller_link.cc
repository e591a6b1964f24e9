#include "worker/rpc/controller_link.h"

#include <grpcpp/create_channel.h>

#include <algorithm>

#include "absl/status/statusor.h"
#include "common/controller_address.h"
#include "common/log.h"

namespace trellis::worker {

std::shared_ptr<grpc::Channel> ControllerChannel(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  // Reconnect within a second of the controller's return: a worker stopped
  // by srun has KillWait (often 5 to 30 s) to deliver its final report, and
  // gRPC's own backoff (1 s growing to 5 s here before) could miss a
  // controller back after 3 s (controller_restart_heal.sh outage). A
  // connection attempt to a host that refuses it costs a SYN and a RST.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A controller whose host vanished closes nothing: pings (and the TCP
  // user timeout they set) break the connection within a minute, so that
  // the link reads the address file of a successor. The controller allows
  // pings this often (controller/shell/grpc_serving.cc).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  return grpc::CreateCustomChannel(address, std::move(credentials), args);
}

ControllerLink::ControllerLink(std::string address, std::string controller_file,
                               std::shared_ptr<grpc::ChannelCredentials> credentials)
    : file_(std::move(controller_file)), credentials_(std::move(credentials)) {
  std::lock_guard<std::mutex> lock(mu_);
  address_ = std::move(address);
  if (!file_.empty()) {
    absl::StatusOr<ControllerAddress> read = ReadControllerAddress(file_);
    last_read_ = std::chrono::steady_clock::now();
    if (!read.ok()) {
      ReportReadLocked(read.status());
    } else if (read->address != address_) {
      // The file is rewritten each time a controller starts serving: it is
      // newer than the batch script's --controller.
      spdlog::info("--controller is {}, but {} names {}: dialing {}", address_, file_,
                   read->address, read->address);
      address_ = read->address;
    }
  }
  SwitchLocked(address_);
}

ControllerLink::ControllerLink(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)), stub_(v1::AgentService::NewStub(channel_)) {}

void ControllerLink::SwitchLocked(const std::string& address) {
  address_ = address;
  channel_ = ControllerChannel(address_, credentials_);
  stub_ = v1::AgentService::NewStub(channel_);
}

void ControllerLink::ReportReadLocked(const absl::Status& st) {
  const std::string why(st.message());
  if (why == last_error_) return;
  last_error_ = why;
  // No file is the usual state until a controller moves (or one that
  // predates the file): worth a line, not a warning.
  if (st.code() == absl::StatusCode::kNotFound)
    spdlog::info("{}; dialing {}", why, address_);
  else
    spdlog::warn("{}; still dialing {}", why, address_);
}

bool ControllerLink::Refresh() {
  if (file_.empty()) return false;
  std::lock_guard<std::mutex> reading(read_mu_);
  absl::StatusOr<ControllerAddress> read = ReadControllerAddress(file_);
  std::lock_guard<std::mutex> lock(mu_);
  last_read_ = std::chrono::steady_clock::now();
  if (!read.ok()) {
    ReportReadLocked(read.status());
    return false;
  }
  last_error_.clear();
  if (read->address == address_) return false;
  spdlog::warn("the controller moved: {} -> {} ({})", address_, read->address, file_);
  SwitchLocked(read->address);
  return true;
}

bool ControllerLink::WaitConnected(Seconds limit) {
  using Steady = std::chrono::steady_clock;
  const Steady::time_point end =
      Steady::now() + std::chrono::duration_cast<Steady::duration>(std::max(limit, Seconds(0)));
  for (;;) {
    const Steady::duration slice =
        std::clamp(end - Steady::now(), Steady::duration::zero(),
                   std::chrono::duration_cast<Steady::duration>(kLinkPoll));
    // gRPC's deadlines are on the system clock.
    if (channel()->WaitForConnected(std::chrono::system_clock::now() +
                                    std::chrono::duration_cast<std::chrono::nanoseconds>(slice)))
      return true;
    bool poll = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      poll = !file_.empty() && Steady::now() - last_read_ >= kLinkPoll;
    }
    if (poll) Refresh();
    if (Steady::now() >= end) return false;
  }
}

std::string ControllerLink::address() const {
  std::lock_guard<std::mutex> lock(mu_);
  return address_;
}

std::shared_ptr<grpc::Channel> ControllerLink::channel() const {
  std::lock_guard<std::mutex> lock(mu_);
  return channel_;
}

std::shared_ptr<v1::AgentService::Stub> ControllerLink::stub() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stub_;
}

}  // namespace trellis::worker
