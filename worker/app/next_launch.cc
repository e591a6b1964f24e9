// `trellis-worker next-launch`: the batch script's question after each launch.
#include <iostream>

#include "common/log.h"
#include "common/tls.h"
#include "worker/app/agent.h"
#include "worker/app/identity.h"
#include "worker/rpc/agent_client.h"

namespace trellis::worker {

int RunNextLaunch(const NextLaunchArgs& args, Clock& clock) {
  // Whatever goes wrong, the script gets a line it can act on: the step's
  // own status, so a failed launch is never reported as a success.
  auto fallback = [&](const std::string& why) {
    spdlog::error("next-launch: {}; answering exit {}", why, args.step_exit_code);
    std::cout << "exit " << args.step_exit_code << std::endl;
    return 0;
  };
  auto id = LoadIdentity(args.id);
  if (!id.ok()) return fallback(std::string(id.status().message()));
  auto credentials = tls::ChannelCredentials("--tls-ca", args.id.tls_ca);
  if (!credentials.ok()) return fallback(std::string(credentials.status().message()));
  AgentClient client(
      std::make_shared<ControllerLink>(args.id.controller, args.id.controller_file, *credentials),
      *id, clock);
  NextLaunchAsk ask{args.step_exit_code, args.requeue_count, args.allocation_nodelist,
                   args.terminated_by_slurm, args.time_limit_warned};
  auto choice = client.NextLaunch(ask, args.timeout);
  if (!choice.ok())
    return fallback("the controller did not answer: " + std::string(choice.status().message()));
  std::string line = FormatNextLaunchLine(*choice, args.step_exit_code);
  if (line.rfind("relaunch", 0) != 0 && choice->relaunch)
    spdlog::error("next-launch: unusable relaunch answer (launch {}); answering {}",
                  choice->next_launch, line);
  std::cout << line << std::endl;
  return 0;
}

}  // namespace trellis::worker
