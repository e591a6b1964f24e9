#pragma once
// The subcommands, as functions of their validated arguments returning
// the process exit code. main.cc only parses flags and calls these.

#include "common/clock.h"
#include "common/exit_codes.h"
#include "worker/core/args.h"

namespace trellis::worker {

// Exit codes of `trellis-worker agent` besides the ranks' own: kExitError,
// kExitUsage, kExitGateAbort, kExitRefused of common/exit_codes.h.
using trellis::kExitError;
using trellis::kExitGateAbort;
using trellis::kExitRefused;
using trellis::kExitUsage;

// `clock` times the retries, the heartbeat, the kill grace and the step stream.
int RunAgent(const AgentArgs& args, Clock& clock);

// Prints exactly one line on stdout: "relaunch <launch> <node,node|->" (the
// nodes the next launch runs on; "-": every node of the allocation) or
// "exit <code>". Returns 0 unless the arguments are unusable.
int RunNextLaunch(const NextLaunchArgs& args, Clock& clock);

// The standby step of a spare pool job: registers the node and waits until
// the controller says to leave (exit 0); kExitRefused when it refuses the
// worker, kExitUsage for an unreadable spec or secret file. An unreachable
// controller is called again, without end.
int RunStandby(const StandbyArgs& args, Clock& clock);

// `trellis doctor`'s checks of this node: one JSON line per check on stdout
// (common/check_line.h) and nothing else there. kExitError when one failed,
// else 0. `clock` times the dial of the controller.
int RunCheck(const CheckArgs& args, Clock& clock);

}  // namespace trellis::worker
