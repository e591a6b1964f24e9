#pragma once
// Test double of the controller's AgentService: records what workers send and
// answers as configured. Bind it to 127.0.0.1:0.

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
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
  // Like the controller: a batch is stored once (a batch sent again is a
  // duplicate) and answered. `lose_ack_of_seq`: that batch is stored but the
  // stream breaks before its answer, once; `refuse_seq`: refused.
  grpc::Status Report(grpc::ServerContext*,
                      grpc::ServerReaderWriter<v1::ReportAck, v1::AgentReport>* stream) override {
    v1::AgentReport r;
    while (stream->Read(&r)) {
      v1::ReportAck ack;
      {
        std::lock_guard<std::mutex> l(mu);
        reports.push_back(r);
        changed.notify_all();
        if (!r.has_batch()) continue;
        const uint64_t seq = r.batch().seq();
        ack.set_seq(seq);
        if (seq == refuse_seq) {
          ack.set_result(v1::ReportAck::RESULT_REFUSED);
          ack.set_error("refused by the test");
        } else if (stored_seqs.insert(seq).second) {
          for (const auto& s : r.batch().steps()) steps.push_back(s);
          ack.set_result(v1::ReportAck::RESULT_STORED);
        } else {
          ack.set_result(v1::ReportAck::RESULT_DUPLICATE);
        }
        if (seq == lose_ack_of_seq) {
          lose_ack_of_seq = 0;
          return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the test lost the answer");
        }
      }
      if (!stream->Write(ack)) break;
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
  size_t step_count() {
    std::lock_guard<std::mutex> l(mu);
    return steps.size();
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
  std::vector<v1::AgentReport> reports;  // as received, batches sent again included
  std::vector<v1::RankStep> steps;       // stored, in order, each once
  std::set<uint64_t> stored_seqs;
  uint64_t lose_ack_of_seq = 0;
  uint64_t refuse_seq = 0;
  std::vector<v1::ReportExitRequest> exits;
  std::vector<v1::NextLaunchRequest> next_requests;
};

// The identity the tests' worker sends: run r1, attempt 1, launch 1, node n1.
inline v1::WorkerIdentity TestIdentity() {
  v1::WorkerIdentity id;
  id.set_run_id("r1");
  id.set_attempt(1);
  id.set_launch(1);
  id.set_node("n1");
  id.set_secret("s");
  return id;
}

// Serves `service` on `address` ("127.0.0.1:0": any free port); sets *port.
inline std::unique_ptr<grpc::Server> Serve(FakeAgentService* service, int* port,
                                           const std::string& address = "127.0.0.1:0") {
  grpc::ServerBuilder b;
  b.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  b.RegisterService(service);
  return b.BuildAndStart();
}

}  // namespace trellis::worker::testing
