// `trellis-worker standby`: the one step of a run's spare pool job
// (docs/architecture.md, "Spare pool"). Probes the node's memory once, then
// calls StandBy again and again: the first call registers the node and has
// the controller gate the probe; each answer comes at the controller's next
// reconciliation, until it says to leave (the pool job was drawn into a
// relaunch, or ended). The job's batch script then holds the allocation for
// the relaunch's own step.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/log.h"
#include "common/tls.h"
#include "common/version.h"
#include "trellis/v1/agent.grpc.pb.h"
#include "worker/app/agent.h"
#include "worker/app/register_probe.h"
#include "worker/app/spec_file.h"
#include "worker/core/memory_probe.h"
#include "worker/io/node_info.h"
#include "worker/rpc/agent_proto.h"
#include "worker/rpc/controller_link.h"

namespace trellis::worker {
namespace {

// The controller refused this worker: calling again would not change that.
bool IsStandbyRefusal(grpc::StatusCode code) {
  return code == grpc::StatusCode::PERMISSION_DENIED || code == grpc::StatusCode::NOT_FOUND ||
         code == grpc::StatusCode::FAILED_PRECONDITION ||
         code == grpc::StatusCode::INVALID_ARGUMENT ||
         code == grpc::StatusCode::UNAUTHENTICATED;
}

// Between calls the controller did not answer: 1 s, doubling, at most 10 s.
constexpr std::chrono::milliseconds kFirstRetry{1000};
constexpr std::chrono::milliseconds kLastRetry{10000};

}  // namespace

int RunStandby(const StandbyArgs& args, Clock& clock) {
  auto spec = LoadSpec(args.run_dir);
  if (!spec.ok()) {
    spdlog::error("{}", std::string(spec.status().message()));
    return kExitUsage;
  }
  std::ifstream in(args.secret_file);
  std::ostringstream content;
  if (in) content << in.rdbuf();
  const std::string secret = TrimSecret(content.str());
  if (secret.empty()) {
    spdlog::error("cannot read the pool job's secret from {} (missing or empty)",
                  args.secret_file);
    return kExitUsage;
  }
  v1::StandByRequest req;
  req.set_run_id(args.run_id);
  req.set_pool(args.pool);
  req.set_node(args.node);
  req.set_secret(secret);
  req.set_version(kVersion);
  req.set_hostname(Hostname());
  const char* job = std::getenv("SLURM_JOB_ID");
  req.set_slurm_job_id(job != nullptr ? job : "");
  // Before the channel exists: the touch probe forks, gRPC's threads must not yet.
  ToProto(ProbeMemoryForRegister(
              ResolveSysfsRoot(args.sysfs_root, std::getenv("TRELLIS_SYSFS_ROOT"), args.node),
              spec->gate.touch_probe, args.touch_probe_gib, args.touch_probe_budget, clock.Now()),
          req.mutable_probe());
  auto credentials = tls::ChannelCredentials("--tls-ca", args.tls_ca);
  if (!credentials.ok()) {
    spdlog::error("{}", std::string(credentials.status().message()));
    return kExitUsage;
  }
  ControllerLink link(args.controller, args.controller_file, *credentials);
  spdlog::info("node {} stands by for run {} (spare pool job {}), controller {}", args.node,
               args.run_id, args.pool, link.address());
  std::string told;  // the last answer logged
  std::chrono::milliseconds retry = kFirstRetry;
  int failures = 0;
  for (;;) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::duration_cast<std::chrono::milliseconds>(args.call_timeout));
    v1::StandByAnswer answer;
    grpc::Status st = link.stub()->StandBy(&ctx, req, &answer);
    if (st.ok()) {
      if (answer.leave()) {
        spdlog::info("leaving: {}", answer.reason());
        return 0;
      }
      if (answer.reason() != told) spdlog::info("standing by: {}", answer.reason());
      told = answer.reason();
      retry = kFirstRetry;
      failures = 0;
      continue;
    }
    if (IsStandbyRefusal(st.error_code())) {
      spdlog::error("the controller refused this standby worker: {}", st.error_message());
      return kExitRefused;
    }
    // Unreachable, restarting, or not ready for this pool job yet: a spare
    // has nothing better to do than call again.
    if (failures++ % 30 == 0)
      spdlog::warn("StandBy: {} (calling again every {} s at most)", st.error_message(),
                   kLastRetry.count() / 1000);
    // The backoff as before; while it runs, a controller that cannot be
    // reached is looked for where its address file says it moved.
    const auto next_call = std::chrono::steady_clock::now() + retry;
    link.WaitConnected(retry);
    std::this_thread::sleep_until(next_call);
    retry = std::min(retry * 2, kLastRetry);
  }
}

}  // namespace trellis::worker
