#include "controller/core/quarantine.h"

#include <algorithm>

namespace trellis::controller {

const char* NodeHealthName(NodeHealth h) {
  switch (h) {
    case NodeHealth::kOk: return "ok";
    case NodeHealth::kQuarantined: return "quarantined";
    case NodeHealth::kProbation: return "probation";
    case NodeHealth::kChecking: return "checking";
  }
  return "ok";
}

namespace {
// A passing check that started at or after the expiry: one that ran while
// the node was still struck says nothing of it since.
bool CertifiedAfter(const QuarantineEntry& e, WallTime expiry) {
  const auto& c = e.last_check;
  return c && c->ended && c->passed && c->started >= expiry;
}

// When the quarantine ended (released; expired, and certified where that is
// asked), if it has.
std::optional<WallTime> EndedAt(const QuarantineEntry& e, WallTime now,
                                const QuarantineConfig& config) {
  if (e.released) return e.released;
  if (!e.expiry || now < *e.expiry) return std::nullopt;
  if (!config.certify_return) return e.expiry;
  if (CertifiedAfter(e, *e.expiry)) return e.last_check->ended;
  return std::nullopt;
}
}  // namespace

NodeHealth HealthAt(const QuarantineEntry& e, WallTime now, const QuarantineConfig& config) {
  if (e.strikes == 0) return NodeHealth::kOk;
  auto ended = EndedAt(e, now, config);
  if (!ended) {
    const bool expired = !e.released && e.expiry && now >= *e.expiry;
    return expired ? NodeHealth::kChecking : NodeHealth::kQuarantined;
  }
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
  if (existing) e.last_check = existing->last_check;
  if (!until_released) {
    auto duration = config.base_duration * (int64_t{1} << std::min(strikes - 1, 20));
    e.expiry = now + std::min<std::chrono::seconds>(duration, config.max_duration);
  }
  return e;
}

QuarantineEntry Release(const QuarantineEntry& entry, WallTime now,
                        const QuarantineConfig& config) {
  QuarantineEntry e = entry;
  if (!EndedAt(e, now, config)) e.released = now;
  return e;
}

std::vector<std::string> ExcludedNodes(const std::vector<QuarantineEntry>& entries, WallTime now,
                                       const QuarantineConfig& config) {
  std::vector<std::string> out;
  for (const auto& e : entries) {
    const NodeHealth h = HealthAt(e, now, config);
    if (h == NodeHealth::kQuarantined || h == NodeHealth::kChecking) out.push_back(e.node);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace trellis::controller
