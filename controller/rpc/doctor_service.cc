// ControllerService.Doctor: `trellis doctor`'s checks on a thread of their own
// (docs/architecture.md, "Doctor"): the srun they wait on must not hold one of
// gRPC's callback threads, and one doctor at a time is enough.
#include "common/version.h"
#include "controller/rpc/app_proto.h"
#include "controller/rpc/controller_service.h"

namespace trellis::controller {

grpc::ServerUnaryReactor* ControllerServiceImpl::Doctor(grpc::CallbackServerContext* ctx,
                                                        const v1::DoctorRequest* req,
                                                        v1::DoctorResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto caller = auth_.Authenticate(*ctx);
  if (!caller.ok()) {
    reactor->Finish(ToGrpc(caller.status()));
    return reactor;
  }
  if (grpc::Status bad = Check(*req); !bad.ok()) {
    reactor->Finish(bad);
    return reactor;
  }
  if (!doctor_) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this controller has no doctor"));
    return reactor;
  }
  std::lock_guard<std::mutex> lock(doctor_mu_);
  if (doctor_busy_) {
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 "a doctor is running on this controller; try again in a minute"));
    return reactor;
  }
  doctor_busy_ = true;
  if (doctor_thread_.joinable()) doctor_thread_.join();  // the last one, finished
  doctor_thread_ = std::thread([this, reactor, spec = req->spec_toml(), resp] {
    absl::StatusOr<std::vector<CheckLine>> lines = doctor_(spec);
    if (lines.ok()) {
      resp->set_controller_version(kVersion);
      for (const CheckLine& l : *lines) {
        v1::CheckResult* r = resp->add_results();
        r->set_check(l.name);
        r->set_verdict(VerdictWord(l.verdict));
        r->set_detail(l.detail);
      }
    }
    {
      std::lock_guard<std::mutex> done(doctor_mu_);
      doctor_busy_ = false;
    }
    reactor->Finish(lines.ok() ? grpc::Status::OK : ToGrpc(lines.status()));
  });
  return reactor;
}

ControllerServiceImpl::~ControllerServiceImpl() {
  std::thread running;
  {
    std::lock_guard<std::mutex> lock(doctor_mu_);
    running = std::move(doctor_thread_);
  }
  if (running.joinable()) running.join();  // it takes doctor_mu_ at its end
}

}  // namespace trellis::controller
