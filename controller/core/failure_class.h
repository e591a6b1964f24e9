#pragma once
// How a launch ended, and which node (if any) it points at. Pure: the shell
// gathers the evidence (the workers' rank reports and log markers, heartbeats,
// the hang detector in progress.h, the job cgroup's OOM counters) and stores
// the verdict per launch; recovery.h decides what to do with it
// (docs/architecture.md, "A run's life, as implemented").
//
// Precedence, first match wins:
//   1. cancelled                      -> kCancel      (not retryable)
//   2. handoff, time_limit, preempted -> kHandoff, kTimeLimit, kPreemption; blaming,
//      as rules 4-6 would, a lost worker, a hung rank, or else the first
//      failing rank (not after_stop) with a device error or SIGBUS. A rank
//      end carries no time, so its kind decides: a stop never causes those
//      two, so they are its node's fault from before the stop; NCCL/network
//      errors and kills are what a stop leaves on healthy ranks too.
//   3. gate_aborted                   -> kGate
//   4. a lost worker                  -> kNodeLost    blames the first lost node
//   5. a hung rank                    -> kHang        blames the hung rank's node
//   6. the FIRST failing rank (arrival order) that did not end after_stop; if
//      every failing rank ended after_stop, the first of those, blaming no one
//      (it was stopped, so it is a consequence); but before them all, any rank
//      that found its checkpoint damaged (0 below). Its class, first match:
//      0. exit code kExitDamagedCheckpoint with marker damaged_checkpoint
//                                     -> kDamagedCheckpoint (retryable; no blame:
//                                        the files, not the node; recovery.h
//                                        sets the step aside)
//      a. exit code kExitDoNotRetry   -> kUserError   (not retryable): the
//         program's own word wins over log markers
//      b. marker device_oom           -> kDeviceOom
//      c. marker host_oom, or SIGKILL
//         with oom_kills > 0 on its node -> kHostOom
//      d. marker device_error         -> kDeviceError (an Xid outranks the NCCL
//                                        errors it causes)
//      e. marker nccl_error, nccl_timeout or network -> kNccl
//      f. killed by a signal          -> kSignal
//      g. otherwise                   -> kRankExit with its code
//   7. no failing rank: step exit 0 -> kSucceeded; otherwise the step's code
//      decides (79 -> kUserError, 128+n -> kSignal, else kRankExit). With no
//      rank report at all (the controller restarted) this is the only evidence.
// A rank is failing when its exit code or signal is non-zero; a code in
// 129..192 with no signal given counts as killed by signal code-128 (a shell
// between srun and the program reports it that way).
//
// Attribution (`blamed_node`) names one node only when the evidence points at
// the machine rather than the program:
//   - kNodeLost: that node. kHang: the hung rank's node, unless the culprit
//     is unknown (every rank stopped at one step, no process stopped or in
//     the kernel: progress.h); then no one, and the launch relaunches in place.
//   - kDeviceError: the rank's node.
//   - kNccl: the rank's node, unless failing ranks (not after_stop) with NCCL
//     or network markers sit on more than one node (a broken collective fails
//     everywhere; the first to notice is not the culprit).
//   - kSignal: SIGBUS always (a memory or mapped-file fault). SIGKILL only
//     when the node's oom_kills count is known and 0 (unknown: it may have
//     been an OOM kill, so nobody is struck) AND a second signal points at the
//     node: an earlier lone SIGKILL on it (`earlier_lone_kills`, any run) or
//     another rank of this launch on it with a device error (an Xid). One kill
//     alone is as likely a user's or a site watchdog's: it blames no one, its
//     evidence says "lone_kill" (what the next one is compared with), and the
//     run relaunches in place (recovery.h, rule 5). A lost worker is the
//     third such signal; rule 4 has blamed it before this. SIGSEGV, SIGABRT
//     and the rest: no (user code, or a library aborting on purpose).
//   - Never: kDamagedCheckpoint, kUserError, kRankExit (an exit code is the program's decision; a
//     bug only rank 0 reaches would otherwise strike node 0, and the same code
//     on several nodes is plainly the program), kDeviceOom and kHostOom (a
//     configuration problem), kGate (the gate strikes its own), kCancel; and
//     kTimeLimit, kPreemption only for what rule 2 says.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trellis::controller {

enum class FailureClass {
  kSucceeded,
  kRankExit,
  kSignal,
  kDeviceOom,
  kHostOom,
  kDeviceError,
  kNccl,
  kNodeLost,
  kHang,
  kUserError,
  kGate,
  kTimeLimit,
  kPreemption,
  kCancel,
  // Not a verdict of ClassifyLaunch: Slurm signalled the batch script
  // (scancel, requeue, preemption, the time limit) and the launch ended under
  // it; how the job ends decides what follows (launch_requeue.cc).
  kTerminated,
  // A rank found the checkpoint step it resumed from damaged (rule 6.0).
  kDamagedCheckpoint,
  // Stopped by the controller at a step boundary, with a checkpoint, for the
  // run's next attempt, submitted ahead and started (continuation.h): a
  // time limit that came early.
  kHandoff,
};

// Stable snake_case names ("rank_exit", "device_oom", ...): stored per launch.
std::string_view FailureClassName(FailureClass c);
std::optional<FailureClass> ParseFailureClass(std::string_view name);

struct RankEnd {
  std::string node;
  int rank = 0;
  int exit_code = 0;
  int signal = 0;           // 0: not killed by a signal
  bool after_stop = false;  // ended while its worker was stopping the ranks
  // From the worker's scan of the rank's log tail: "device_oom", "host_oom",
  // "nccl_error", "nccl_timeout", "device_error", "network", "damaged_checkpoint".
  std::vector<std::string> markers;
  std::string evidence_line;  // the log line that matched, for people
};

struct HangEvidence {
  int rank = 0;
  std::string node;
  int64_t last_step = -1;
  double silent_s = 0;
  bool before_first_step = false;
  double timeout_s = 0;        // the timeout it was held to
  std::string timeout_basis;   // how that was found (hang_timeout.h)
  char process_state = 0;      // its process's, as its worker read it (progress.h)
  // Every running rank stopped at the same step and none's process was
  // stopped or in the kernel: nothing says which one held the others.
  bool culprit_unknown = false;
};

struct LaunchEvidence {
  int step_exit_code = 0;                   // srun's
  std::vector<RankEnd> rank_ends;           // in arrival order
  std::vector<std::string> go_nodes;        // nodes that ran ranks
  std::vector<std::string> reported_nodes;  // workers that sent their final report
  // Heartbeat timed out, or the stream broke without a final report; in the
  // order they were found lost.
  std::vector<std::string> lost_nodes;
  std::map<std::string, double> lost_silent_s;  // lost node -> s since last heard, if known
  std::optional<HangEvidence> hang;
  std::map<std::string, int> oom_kills;  // node -> job cgroup oom_kill increase; absent: unknown
  bool cancelled = false;
  bool time_limit = false;
  bool preempted = false;
  bool handoff = false;  // the controller stopped it for the attempt waiting ahead
  bool gate_aborted = false;
  // The controller restarted during the launch: what it heard before (rank
  // exits, final reports) is not part of this evidence.
  bool controller_restarted = false;
  // node -> an earlier launch (any run) on it that ended in a lone SIGKILL
  // (evidence "lone_kill") within kLoneKillMemory, for people ("run r7
  // launch 1.2"): a second one blames the node.
  std::map<std::string, std::string> earlier_lone_kills;
};

// How long a lone SIGKILL is remembered against its node.
inline constexpr std::chrono::hours kLoneKillMemory{24};

struct LaunchVerdict {
  bool succeeded = false;
  FailureClass cls = FailureClass::kRankExit;
  int exit_code = 0;
  std::string reason;         // "rank 1 on node2 exited with 3"
  std::string blamed_node;    // empty: none
  std::string evidence_json;  // a compact JSON object
  bool retryable = false;
};

LaunchVerdict ClassifyLaunch(const LaunchEvidence& evidence);

}  // namespace trellis::controller
