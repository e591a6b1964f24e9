#pragma once
// The controller's quarantine list (pure). A plain user cannot drain Slurm
// nodes, so Trellis keeps its own list and applies it as --exclude. A strike
// quarantines a node for base_duration * 2^(strikes-1); after the expiry the
// node is back on probation (eligible, strikes kept), and after a quiet
// probation period its strikes are forgiven. States are derived from the
// stored entry and `now`, never stored.

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
};

enum class NodeHealth { kOk, kQuarantined, kProbation };
const char* NodeHealthName(NodeHealth h);  // "ok", "quarantined", "probation"

NodeHealth HealthAt(const QuarantineEntry& entry, WallTime now, const QuarantineConfig& config);

// A new strike (from the gate, or a user with `trellis quarantine`; users'
// quarantines last until released). Strikes forgiven after probation restart at 1.
QuarantineEntry Strike(const std::optional<QuarantineEntry>& existing, const std::string& node,
                       const std::string& reason, const std::string& evidence_json,
                       const std::string& actor, bool until_released, WallTime now,
                       const QuarantineConfig& config);

// Ends the quarantine now; the node goes on probation with its strikes.
QuarantineEntry Release(const QuarantineEntry& entry, WallTime now);

// The nodes to pass to sbatch --exclude, sorted.
std::vector<std::string> ExcludedNodes(const std::vector<QuarantineEntry>& entries, WallTime now,
                                       const QuarantineConfig& config);

}  // namespace trellis::controller
