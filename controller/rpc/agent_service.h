#pragma once
// AgentService (workers) on the gRPC callback API.

#include "controller/app/controller.h"
#include "trellis/v1/agent.grpc.pb.h"

namespace trellis::controller {

class AgentServiceImpl final : public v1::AgentService::CallbackService {
 public:
  explicit AgentServiceImpl(Controller* controller) : controller_(controller) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const v1::RegisterRequest* req,
                                     v1::GateDecision* resp) override;
  grpc::ServerBidiReactor<v1::AgentReport, v1::ReportAck>* Report(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* ReportExit(grpc::CallbackServerContext* ctx,
                                       const v1::ReportExitRequest* req,
                                       v1::ReportExitResponse* resp) override;
  grpc::ServerUnaryReactor* NextLaunch(grpc::CallbackServerContext* ctx,
                                       const v1::NextLaunchRequest* req,
                                       v1::NextLaunchResponse* resp) override;
  grpc::ServerUnaryReactor* StandBy(grpc::CallbackServerContext* ctx,
                                    const v1::StandByRequest* req,
                                    v1::StandByAnswer* resp) override;

 private:
  Controller* controller_;
};

}  // namespace trellis::controller
