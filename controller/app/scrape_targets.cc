#include "controller/app/scrape_targets.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>

#include "controller/app/loop_context.h"

namespace trellis::controller {

void ScrapeTargets::Add(const LaunchRef& launch, std::map<std::string, std::string> addresses) {
  if (addresses.empty()) return;
  launches_[launch] = std::move(addresses);
  dirty_ = true;
}

void ScrapeTargets::Remove(const LaunchRef& launch) { dirty_ |= launches_.erase(launch) > 0; }

void ScrapeTargets::RemoveRun(const std::string& run_id) {
  for (auto it = launches_.begin(); it != launches_.end();) {
    if (it->first.run_id != run_id) {
      ++it;
      continue;
    }
    it = launches_.erase(it);
    dirty_ = true;
  }
}

std::string ScrapeTargets::Json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [launch, addresses] : launches_)
    for (const auto& [node, address] : addresses)
      out.push_back({{"targets", nlohmann::json::array({address})},
                     {"labels", {{"run", launch.run_id}, {"node", node}}}});
  return out.dump(2) + "\n";
}

absl::Status ScrapeTargets::Flush() {
  if (!dirty_ || path_.empty()) return absl::OkStatus();
  absl::Status st = WriteFileAtomically(path_, Json(), 0644);
  if (st.ok()) dirty_ = false;
  return st;
}

}  // namespace trellis::controller
