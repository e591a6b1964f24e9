#pragma once
// The controller's quarantine list (pure). A plain user cannot drain Slurm
// nodes, so Trellis keeps its own list and applies it as --exclude. A strike
// quarantines a node for base_duration * 2^(strikes-1); after the expiry the
// node is back on probation (eligible, strikes kept), and after a quiet
// probation period its strikes are forgiven. With certified return
// (certify_return) an expired entry is "checking" instead, still excluded,
// until a check that started after the expiry passes; a failed check is a
// new strike (docs/architecture.md, "Quarantine"). States are derived from
// the stored entry and `now`, never stored.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"

namespace trellis::controller {

struct QuarantineConfig {
  std::chrono::seconds base_duration{std::chrono::hours(1)};
  std::chrono::seconds max_duration{std::chrono::hours(24 * 7)};
  std::chrono::seconds probation{std::chrono::hours(24)};
  // A node leaves an expired quarantine only by a passing check (certify.h).
  bool certify_return = false;
  // A check with no result by then is cancelled and fails.
  std::chrono::seconds certify_timeout{600};
};

// A node's newest certification check: a short Slurm job on it.
struct NodeCheck {
  std::string job_id;  // empty until sbatch answered
  WallTime started;    // submitted
  std::optional<WallTime> ended;
  bool passed = false;
  std::string summary;  // one line
};

struct QuarantineEntry {
  std::string node;
  std::string reason;
  std::string evidence_json;
  std::string actor;  // "gate", "user:alice"
  WallTime since;
  std::optional<WallTime> expiry;  // none: until released
  int strikes = 0;
  std::optional<WallTime> released;  // set by a release before the expiry
  std::optional<NodeCheck> last_check;
};

enum class NodeHealth { kOk, kQuarantined, kProbation, kChecking };
// "ok", "quarantined", "probation", "checking"
const char* NodeHealthName(NodeHealth h);

NodeHealth HealthAt(const QuarantineEntry& entry, WallTime now, const QuarantineConfig& config);

// A new strike (from the gate, or a user with `trellis quarantine`; users'
// quarantines last until released). Strikes forgiven after probation restart at 1.
QuarantineEntry Strike(const std::optional<QuarantineEntry>& existing, const std::string& node,
                       const std::string& reason, const std::string& evidence_json,
                       const std::string& actor, bool until_released, WallTime now,
                       const QuarantineConfig& config);

// Ends the quarantine now, unchecked (a person's word); the node goes on
// probation with its strikes.
QuarantineEntry Release(const QuarantineEntry& entry, WallTime now,
                        const QuarantineConfig& config);

// The nodes to pass to sbatch --exclude (quarantined or checking), sorted.
std::vector<std::string> ExcludedNodes(const std::vector<QuarantineEntry>& entries, WallTime now,
                                       const QuarantineConfig& config);

}  // namespace trellis::controller
