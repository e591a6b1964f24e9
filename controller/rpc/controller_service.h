#pragma once
// ControllerService (users) on the gRPC callback API. Reactors never block:
// they hand the request to the Controller's loop and finish from its reply.

#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/check_line.h"
#include "controller/app/controller.h"
#include "controller/rpc/authenticator.h"
#include "controller/rpc/validate.h"
#include "trellis/v1/controller.grpc.pb.h"

namespace trellis::controller {

class ControllerServiceImpl final : public v1::ControllerService::CallbackService {
 public:
  ControllerServiceImpl(Controller* controller, Authenticator auth)
      : controller_(controller), auth_(std::move(auth)) {}

  grpc::ServerUnaryReactor* SubmitRun(grpc::CallbackServerContext* ctx,
                                      const v1::SubmitRunRequest* req,
                                      v1::SubmitRunResponse* resp) override;
  grpc::ServerUnaryReactor* GetRun(grpc::CallbackServerContext* ctx, const v1::GetRunRequest* req,
                                   v1::Run* resp) override;
  grpc::ServerUnaryReactor* ListRuns(grpc::CallbackServerContext* ctx,
                                     const v1::ListRunsRequest* req,
                                     v1::ListRunsResponse* resp) override;
  grpc::ServerUnaryReactor* CancelRun(grpc::CallbackServerContext* ctx,
                                      const v1::CancelRunRequest* req,
                                      v1::CancelRunResponse* resp) override;
  grpc::ServerWriteReactor<v1::WatchRunEvent>* WatchRun(grpc::CallbackServerContext* ctx,
                                                        const v1::WatchRunRequest* req) override;
  grpc::ServerWriteReactor<v1::LogChunk>* ReadLogs(grpc::CallbackServerContext* ctx,
                                                   const v1::ReadLogsRequest* req) override;
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* ctx,
                                      const v1::ListNodesRequest* req,
                                      v1::ListNodesResponse* resp) override;
  grpc::ServerUnaryReactor* QuarantineNode(grpc::CallbackServerContext* ctx,
                                           const v1::QuarantineNodeRequest* req,
                                           v1::NodeStatus* resp) override;
  grpc::ServerUnaryReactor* ReleaseNode(grpc::CallbackServerContext* ctx,
                                        const v1::ReleaseNodeRequest* req,
                                        v1::NodeStatus* resp) override;
  grpc::ServerUnaryReactor* GateReport(grpc::CallbackServerContext* ctx,
                                       const v1::GateReportRequest* req,
                                       v1::GateReportResponse* resp) override;
  grpc::ServerUnaryReactor* RunSteps(grpc::CallbackServerContext* ctx,
                                     const v1::RunStepsRequest* req,
                                     v1::RunStepsResponse* resp) override;
  grpc::ServerUnaryReactor* Doctor(grpc::CallbackServerContext* ctx,
                                   const v1::DoctorRequest* req,
                                   v1::DoctorResponse* resp) override;

  // `trellis doctor`'s checks (controller/main.cc gives them: they need its
  // flags), run on a thread of their own, one call at a time: they wait on
  // an srun for minutes. Unset: the call is UNIMPLEMENTED.
  using DoctorChecks =
      std::function<absl::StatusOr<std::vector<CheckLine>>(const std::string& spec_toml)>;
  void SetDoctor(DoctorChecks checks) { doctor_ = std::move(checks); }
  ~ControllerServiceImpl() override;  // waits for a doctor still running

 private:
  // Runs `act` once the caller may see and act on `run_id`: an admin at once,
  // a user after the run's owner is read (PERMISSION_DENIED if not theirs).
  void IfOwnRun(const Caller& caller, const std::string& run_id,
                std::function<void(grpc::Status)> act);

  Controller* controller_;
  Authenticator auth_;
  DoctorChecks doctor_;
  std::mutex doctor_mu_;
  std::thread doctor_thread_;  // under doctor_mu_
  bool doctor_busy_ = false;   // under doctor_mu_
};

// The refusal of a run that is not the caller's.
grpc::Status NotYours(const std::string& run_id, const Caller& caller);


}  // namespace trellis::controller
