#include "controller/core/quarantine.h"

#include <algorithm>

namespace trellis::controller {

const char* NodeHealthName(NodeHealth h) {
  switch (h) {
    case NodeHealth::kOk: return "ok";
    case NodeHealth::kQuarantined: return "quarantined";
    case NodeHealth::kProbation: return "probation";
  }
  return "ok";
}

namespace {
// When the quarantine ended (released, or expired), if it has.
std::optional<WallTime> EndedAt(const QuarantineEntry& e, WallTime now) {
  if (e.released) return e.released;
  if (e.expiry && now >= *e.expiry) return e.expiry;
  return std::nullopt;
}
}  // namespace

NodeHealth HealthAt(const QuarantineEntry& e, WallTime now, const QuarantineConfig& config) {
  if (e.strikes == 0) return NodeHealth::kOk;
  auto ended = EndedAt(e, now);
  if (!ended) return NodeHealth::kQuarantined;
  return now < *ended + config.probation ? NodeHealth::kProbation : NodeHealth::kOk;
}

QuarantineEntry Strike(const std::optional<QuarantineEntry>& existing, const std::string& node,
                       const std::string& reason, const std::string& evidence_json,
                       const std::string& actor, bool until_released, WallTime now,
                       const QuarantineConfig& config) {
  int strikes = 1;
  if (existing && HealthAt(*existing, now, config) != NodeHealth::kOk)
    strikes = existing->strikes + 1;
  QuarantineEntry e;
  e.node = node;
  e.reason = reason;
  e.evidence_json = evidence_json;
  e.actor = actor;
  e.since = now;
  e.strikes = strikes;
  if (!until_released) {
    auto duration = config.base_duration * (int64_t{1} << std::min(strikes - 1, 20));
    e.expiry = now + std::min<std::chrono::seconds>(duration, config.max_duration);
  }
  return e;
}

QuarantineEntry Release(const QuarantineEntry& entry, WallTime now) {
  QuarantineEntry e = entry;
  if (!EndedAt(e, now)) e.released = now;
  return e;
}

std::vector<std::string> ExcludedNodes(const std::vector<QuarantineEntry>& entries, WallTime now,
                                       const QuarantineConfig& config) {
  std::vector<std::string> out;
  for (const auto& e : entries)
    if (HealthAt(e, now, config) == NodeHealth::kQuarantined) out.push_back(e.node);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace trellis::controller
