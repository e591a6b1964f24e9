#pragma once
// Exit codes shared by the worker, the ranks, the batch script and the
// controller (docs/architecture.md, "The controller's parts"). The batch script's copies
// are literals; tests/e2e check they agree.

namespace trellis {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // anything else: unreachable controller, cannot start, ...
inline constexpr int kExitUsage = 2;  // bad flags, unreadable spec or secret
// A rank (or its program) that exits with this code says: my input or code is
// wrong, retrying cannot help. The run fails at once; no node is blamed.
inline constexpr int kExitDoNotRetry = 79;
// A rank that could not resume because the checkpoint step it was given is
// damaged (its files are not what the manifest recorded; EX_IOERR). The
// controller sets the step aside and resumes from an older one.
inline constexpr int kExitDamagedCheckpoint = 74;
inline constexpr int kExitGateAbort = 75;   // the gate said ABORT (EX_TEMPFAIL)
inline constexpr int kExitRefused = 78;     // the controller refused the worker (EX_CONFIG)
// trellis-controller: another controller holds the state directory's lease
// (EX_CANTCREAT). A keeper that starts controllers on a schedule (scrontab)
// reads it as "one is running".
inline constexpr int kExitStateHeld = 73;
inline constexpr int kExitCancelled = 130;  // the attempt ended by a cancel
inline constexpr int kExitCannotStart = 127;
inline constexpr int kExitSignalBase = 128;  // 128 + signal: killed by that signal

}  // namespace trellis
