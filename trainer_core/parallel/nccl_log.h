#pragma once
// How many CTAs NCCL's collectives launch, read from NCCL's own log. NCCL has
// no API for it; with NCCL_DEBUG=INFO and the INIT subsystem it logs, once per
// communicator it sets up,
//   host:1234:1240 [0] NCCL INFO 24 coll channels, 24 collnet channels,
//       0 nvls channels, 32 p2p channels, 32 p2p channels per peer
// (one line; older NCCL logs fewer kinds). Each collective launches one CTA
// (one SM) per coll channel, so NCCL_MAX_CTAS=16 makes it 16. Also: PyTorch's
// blocking wait, which a rank turns off (PlanNcclBlockingWait). Pure: text and
// environment values in, decisions out; the file I/O is nccl_log_file.h.
// Torch-free.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trellis::train {

struct NcclChannels {
  int64_t coll = 0;                     // the most coll channels of any communicator
  std::optional<int64_t> p2p_per_peer;  // the most p2p channels per peer, where logged
  int communicators = 0;                // "coll channels" lines seen
};

// The channel counts of every communicator logged in `log` (complete lines;
// lines of other subsystems and other messages are skipped). nullopt when no
// communicator's line is there.
std::optional<NcclChannels> ParseNcclChannels(std::string_view log);

// Both logs' communicators together.
NcclChannels MergeNcclChannels(const NcclChannels& a, const NcclChannels& b);

// What the rank's environment says about NCCL's log (unset: nullopt).
struct NcclLogEnv {
  std::optional<std::string> debug;         // NCCL_DEBUG
  std::optional<std::string> debug_file;    // NCCL_DEBUG_FILE
  std::optional<std::string> debug_subsys;  // NCCL_DEBUG_SUBSYS
};

struct NcclLogPlan {
  // Variables to set before NCCL starts (it reads them once, at its first call).
  std::vector<std::pair<std::string, std::string>> set;
  std::string follow;  // the file to read the channel counts from; empty: none
  std::string note;    // one line for the start-up log: where the log goes, or why none is read
};

// The decision for one rank that meets its peers over NCCL:
// - NCCL_DEBUG unset (or empty): INFO for the INIT subsystem, to `own_file`
//   (NCCL writes to standard output otherwise, where trellis-train's --json
//   records go); `own_file` is followed.
// - NCCL_DEBUG and NCCL_DEBUG_FILE set by the user: their file is followed
//   (NCCL's %h and %p expanded with `host`, cut at its first '.', and `pid`),
//   when their level (INFO, ABORT, TRACE) and subsystems log INIT's lines.
// - NCCL_DEBUG set without a file: NCCL logs to standard output; nothing is
//   followed or changed.
NcclLogPlan PlanNcclLog(const NcclLogEnv& env, const std::string& own_file,
                        const std::string& host, int pid);

// NCCL_DEBUG_FILE's name as NCCL opens it: %h the host name up to its first
// '.', %p the process id, %% one '%'; any other %x is kept as written.
std::string ExpandNcclDebugFile(const std::string& pattern, const std::string& host, int pid);

// True when NCCL_DEBUG_SUBSYS (nullopt: NCCL's default) lets INIT's INFO
// lines through: a comma list of subsystems (ALL for all), or "^" and the
// list of those left out.
bool NcclSubsysLogsInit(const std::optional<std::string>& subsys);

// PyTorch's blocking wait: TORCH_NCCL_BLOCKING_WAIT (NCCL_BLOCKING_WAIT
// before PyTorch 2.2; the newer name wins) makes every wait on an NCCL
// collective hold the host until the collective ends. Comm (comm.cc) waits on
// a side stream right after it starts each collective, to stamp its end, so
// with it every collective would block the host where it starts: nothing
// would overlap compute, and the exposed-communication figures would read
// near zero while the GPU idles. A rank that meets over NCCL turns it off;
// a stuck peer is still found by the peer watch within the collective
// timeout (TRELLIS_COMM_TIMEOUT_S).
struct NcclBlockingWaitEnv {
  std::optional<std::string> torch_name;  // TORCH_NCCL_BLOCKING_WAIT
  std::optional<std::string> old_name;    // NCCL_BLOCKING_WAIT
};
struct NcclBlockingWaitPlan {
  bool turn_off = false;  // set TORCH_NCCL_BLOCKING_WAIT=0, unset NCCL_BLOCKING_WAIT
  std::string note;       // one line for the start-up log when turned off
};
// Turns it off when either name holds anything but one of PyTorch's false
// values (n, no, 0, f, false; any case) or nothing: its true values, and a
// value PyTorch would refuse when the group is made.
NcclBlockingWaitPlan PlanNcclBlockingWait(const NcclBlockingWaitEnv& env);

}  // namespace trellis::train
