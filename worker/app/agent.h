#pragma once
// The two subcommands, as functions of their validated arguments returning
// the process exit code. main.cc only parses flags and calls these.

#include "worker/core/args.h"

namespace trellis::worker {

// Exit codes of `trellis-worker agent` besides the ranks' own.
inline constexpr int kExitError = 1;     // controller unreachable, cannot start, ...
inline constexpr int kExitUsage = 2;     // bad flags, unreadable spec or secret
inline constexpr int kExitAbort = 75;    // the gate said ABORT (EX_TEMPFAIL)
inline constexpr int kExitRefused = 78;  // the controller refused us (version, secret)

int RunAgent(const AgentArgs& args);

// Prints exactly one line on stdout: "relaunch <launch> <nodes|->" or
// "exit <code>". Returns 0 unless the arguments are unusable.
int RunNextLaunch(const NextLaunchArgs& args);

}  // namespace trellis::worker
