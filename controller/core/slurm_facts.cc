#include "controller/core/slurm_facts.h"

#include <algorithm>
#include <cctype>

namespace trellis::controller {
namespace {

struct JobStateRow {
  SlurmJobState::Base base;
  std::string_view word;
  bool terminal;
};
constexpr JobStateRow kJobStates[] = {
    {SlurmJobState::kPending, "PENDING", false},
    {SlurmJobState::kRunning, "RUNNING", false},
    {SlurmJobState::kSuspended, "SUSPENDED", false},
    {SlurmJobState::kCompleting, "COMPLETING", false},
    {SlurmJobState::kCompleted, "COMPLETED", true},
    {SlurmJobState::kCancelled, "CANCELLED", true},
    {SlurmJobState::kFailed, "FAILED", true},
    {SlurmJobState::kTimeout, "TIMEOUT", true},
    {SlurmJobState::kNodeFail, "NODE_FAIL", true},
    {SlurmJobState::kPreempted, "PREEMPTED", true},
    {SlurmJobState::kBootFail, "BOOT_FAIL", true},
    {SlurmJobState::kDeadline, "DEADLINE", true},
    {SlurmJobState::kOutOfMemory, "OUT_OF_MEMORY", true},
    {SlurmJobState::kSpecialExit, "SPECIAL_EXIT", true},
    {SlurmJobState::kRevoked, "REVOKED", true},
};

struct NodeStateRow {
  SlurmNodeState::Base base;
  std::string_view word;  // a prefix of sinfo's word
  bool usable;
};
constexpr NodeStateRow kNodeStates[] = {
    {SlurmNodeState::kIdle, "idle", true},
    {SlurmNodeState::kAllocated, "allocated", true},
    {SlurmNodeState::kMixed, "mixed", true},
    {SlurmNodeState::kCompleting, "completing", true},
    {SlurmNodeState::kPlanned, "planned", true},
    {SlurmNodeState::kReserved, "reserved", true},
    {SlurmNodeState::kDown, "down", false},
    {SlurmNodeState::kDrained, "drain", false},  // "drain", and "drained" below
    {SlurmNodeState::kDrained, "drained", false},
    {SlurmNodeState::kDraining, "draining", false},
    {SlurmNodeState::kFail, "fail", false},
    {SlurmNodeState::kFailing, "failing", false},
    {SlurmNodeState::kFuture, "future", false},
    {SlurmNodeState::kMaint, "maint", false},
    {SlurmNodeState::kReboot, "reboot", false},
    {SlurmNodeState::kUnknown, "unknown", false},
    {SlurmNodeState::kNotResponding, "not_responding", false},
};

struct NodeFlagChar {
  char c;
  SlurmNodeState::Flag flag;
  bool usable;  // a node with this flag may still be given work
};
constexpr NodeFlagChar kNodeFlags[] = {
    {'*', SlurmNodeState::kFlagNotResponding, false},
    {'~', SlurmNodeState::kFlagPoweredDown, false},
    {'#', SlurmNodeState::kFlagPoweringUp, false},
    {'%', SlurmNodeState::kFlagPoweringDown, true},
    {'!', SlurmNodeState::kFlagPowerDownPending, true},
    {'-', SlurmNodeState::kFlagPlanned, true},
    {'@', SlurmNodeState::kFlagRebootPending, true},
    {'^', SlurmNodeState::kFlagRebootIssued, true},
    {'$', SlurmNodeState::kFlagMaintenance, true},
};

const NodeFlagChar* FlagOf(char c) {
  for (const NodeFlagChar& f : kNodeFlags)
    if (f.c == c) return &f;
  return nullptr;
}

// The longest table word `word` starts with; none: nullptr.
const NodeStateRow* NodeRowOf(std::string_view word) {
  const NodeStateRow* best = nullptr;
  for (const NodeStateRow& row : kNodeStates)
    if (word.substr(0, row.word.size()) == row.word &&
        (best == nullptr || row.word.size() > best->word.size()))
      best = &row;
  return best;
}

}  // namespace

SlurmJobState::SlurmJobState(std::string_view word) : word_(word) {
  for (const JobStateRow& row : kJobStates)
    if (row.word == word) base_ = row.base;
}

bool SlurmJobState::terminal() const {
  for (const JobStateRow& row : kJobStates)
    if (row.base == base_) return row.terminal;
  return false;
}

SlurmNodeState::SlurmNodeState(std::string_view word) {
  while (!word.empty() && FlagOf(word.back()) != nullptr) {
    flags_ |= FlagOf(word.back())->flag;
    word.remove_suffix(1);
  }
  word_ = std::string(word);
  if (const NodeStateRow* row = NodeRowOf(word)) base_ = row->base;
}

bool IsUsableNodeState(const SlurmNodeState& state) {
  for (const NodeFlagChar& f : kNodeFlags)
    if (!f.usable && state.has(f.flag)) return false;
  const NodeStateRow* row = NodeRowOf(state.name());
  return row == nullptr || row->usable;
}

bool IsNodeName(std::string_view n) {
  return !n.empty() && n.size() <= 255 && std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

}  // namespace trellis::controller
