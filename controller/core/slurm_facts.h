#pragma once
// What Trellis needs to know about Slurm jobs and nodes, independent of how it
// was asked (squeue, scontrol, sacct, sinfo) or faked. The parsers
// (controller/slurm/parsers.h) read Slurm's words into these types; the
// decisions here ask the typed state, never the text.

#include <cstdint>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trellis::controller {

// A job's base state (squeue %T, scontrol JobState, sacct State; flags such
// as "+" or "by 0" already cut off). One table in slurm_facts.cc: state ->
// Slurm's word -> terminal. A word not in it is kOther, its text kept for
// messages; it is not terminal (a state Slurm adds later is taken as live).
class SlurmJobState {
 public:
  enum Base : uint8_t {
    kPending, kRunning, kSuspended, kCompleting, kCompleted, kCancelled, kFailed, kTimeout,
    kNodeFail, kPreempted, kBootFail, kDeadline, kOutOfMemory, kSpecialExit, kRevoked, kOther
  };
  SlurmJobState() = default;
  // Slurm's word. Implicit, so that fakes and tests write the job's state as
  // Slurm prints it.
  SlurmJobState(std::string_view word);  // NOLINT(runtime/explicit)
  SlurmJobState(const char* word) : SlurmJobState(std::string_view(word)) {}  // NOLINT
  SlurmJobState(const std::string& word) : SlurmJobState(std::string_view(word)) {}  // NOLINT

  Base base() const { return base_; }
  // The job will not run again.
  bool terminal() const;
  // Slurm's word as it printed it: "TIMEOUT".
  const std::string& name() const { return word_; }

  bool operator==(Base b) const { return base_ == b; }
  bool operator!=(Base b) const { return base_ != b; }

 private:
  Base base_ = kOther;
  std::string word_;
};

// A node's state as sinfo %T prints it: a base state and the flags Slurm
// appends ("down*": not responding; "idle~": powered down; "idle#": powering
// up; "idle%": powering down; "idle!": power down pending; "mixed-":
// planned; "idle@": reboot pending; "idle^": reboot issued; "idle$":
// maintenance reservation).
class SlurmNodeState {
 public:
  enum Base : uint8_t {
    kIdle, kAllocated, kMixed, kCompleting, kPlanned, kReserved, kDown, kDrained, kDraining,
    kFail, kFailing, kFuture, kMaint, kReboot, kUnknown, kNotResponding, kOther
  };
  enum Flag : uint16_t {
    kNoFlags = 0,
    kFlagNotResponding = 1 << 0,     // '*'
    kFlagPoweredDown = 1 << 1,       // '~'
    kFlagPoweringUp = 1 << 2,        // '#'
    kFlagPoweringDown = 1 << 3,      // '%'
    kFlagPowerDownPending = 1 << 4,  // '!'
    kFlagPlanned = 1 << 5,           // '-'
    kFlagRebootPending = 1 << 6,     // '@'
    kFlagRebootIssued = 1 << 7,      // '^'
    kFlagMaintenance = 1 << 8,       // '$'
  };
  SlurmNodeState() = default;
  // sinfo's word with its flags: "down*", "drained", "idle~". Implicit, as for
  // jobs. The base is the longest table word the text starts with
  // ("reboot_issued" is kReboot); none: kOther.
  SlurmNodeState(std::string_view word);  // NOLINT(runtime/explicit)
  SlurmNodeState(const char* word) : SlurmNodeState(std::string_view(word)) {}  // NOLINT
  SlurmNodeState(const std::string& word) : SlurmNodeState(std::string_view(word)) {}  // NOLINT

  Base base() const { return base_; }
  bool has(Flag f) const { return (flags_ & f) != 0; }
  // The base word as Slurm printed it: "down", "drained".
  const std::string& name() const { return word_; }

  bool operator==(Base b) const { return base_ == b; }
  bool operator!=(Base b) const { return base_ != b; }

 private:
  Base base_ = kOther;
  uint16_t flags_ = kNoFlags;
  std::string word_;  // the base word as Slurm printed it
};

struct SlurmJob {
  std::string id;
  SlurmJobState state;
  std::string reason;    // squeue/scontrol Reason
  std::string nodelist;  // compressed hostlist, e.g. "node[1-2]"
  std::optional<int> exit_code;  // from ExitCode=E:S: E, or 128+S when S != 0
  std::optional<int> restarts;   // scontrol Restarts=: how often Slurm requeued it
  // squeue's %l and %L: the job's time limit and, while it runs, the time it
  // has left (a pending job's is its whole limit); none: unlimited or unknown.
  std::optional<std::chrono::seconds> time_limit{};
  std::optional<std::chrono::seconds> time_left{};
};

struct SlurmNode {
  std::string name;
  SlurmNodeState state;
};

// An association of the controller's user in Slurm's accounting (sacctmgr
// show assoc): an account and the QOS its jobs may ask for.
struct SlurmAssociation {
  std::string account;
  std::vector<std::string> qos;
};

// Terminal Slurm job states: the job will not run again.
inline bool IsTerminalJobState(const SlurmJobState& state) { return state.terminal(); }
// A node Slurm would place work on: not down, drained, draining, failing,
// rebooting or in maintenance, and without a flag that it does not answer or
// is powered (or powering) down or up.
bool IsUsableNodeState(const SlurmNodeState& state);
// A name a node may have here: [A-Za-z0-9._-]{1,255}. It reaches Slurm's
// command lines (scontrol, --exclude) and the quarantine list.
bool IsNodeName(std::string_view name);

}  // namespace trellis::controller
