#pragma once
// Test double of the controller's AgentService: records what workers send and
// answers as configured. Bind it to 127.0.0.1:0.

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "trellis/v1/agent.grpc.pb.h"

namespace trellis::worker::testing {

class FakeAgentService final : public v1::AgentService::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* req,
                        v1::GateDecision* out) override {
    std::lock_guard<std::mutex> l(mu);
    registers.push_back(*req);
    changed.notify_all();
    if (!register_status.ok()) return register_status;
    *out = decision;
    return grpc::Status::OK;
  }
  grpc::Status StreamSteps(grpc::ServerContext*, grpc::ServerReader<v1::AgentReport>* reader,
                           v1::StreamStepsResponse*) override {
    v1::AgentReport r;
    while (reader->Read(&r)) {
      std::lock_guard<std::mutex> l(mu);
      reports.push_back(r);
      changed.notify_all();
    }
    return grpc::Status::OK;
  }
  grpc::Status ReportExit(grpc::ServerContext*, const v1::ReportExitRequest* req,
                          v1::ReportExitResponse*) override {
    std::lock_guard<std::mutex> l(mu);
    exits.push_back(*req);
    changed.notify_all();
    return grpc::Status::OK;
  }
  grpc::Status NextLaunch(grpc::ServerContext*, const v1::NextLaunchRequest* req,
                          v1::NextLaunchResponse* out) override {
    std::lock_guard<std::mutex> l(mu);
    next_requests.push_back(*req);
    *out = next;
    return grpc::Status::OK;
  }

  size_t report_count() {
    std::lock_guard<std::mutex> l(mu);
    return reports.size();
  }

  // Waits until `done` (called under the lock) holds, or `limit` passes.
  bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> l(mu);
    return changed.wait_for(l, limit, done);
  }

  std::mutex mu;
  std::condition_variable changed;  // on every call recorded
  grpc::Status register_status;
  v1::GateDecision decision;
  v1::NextLaunchResponse next;
  std::vector<v1::RegisterRequest> registers;
  std::vector<v1::AgentReport> reports;
  std::vector<v1::ReportExitRequest> exits;
  std::vector<v1::NextLaunchRequest> next_requests;
};
// Serves `service` on `address` ("127.0.0.1:0": any free port); sets *port.
inline std::unique_ptr<grpc::Server> Serve(FakeAgentService* service, int* port,
                                           const std::string& address = "127.0.0.1:0") {
  grpc::ServerBuilder b;
  b.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  b.RegisterService(service);
  return b.BuildAndStart();
}

}  // namespace trellis::worker::testing
