#include "controller/app/scrape_targets.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>

#include "controller/app/loop_context.h"

namespace trellis::controller {

bool IsHostPort(std::string_view address, int min_port) {
  if (address.size() > 255) return false;
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view host = address.substr(0, colon), port_text = address.substr(colon + 1);
  int port = -1;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < min_port ||
      port > 65535)
    return false;
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    host = host.substr(1, host.size() - 2);
    return std::all_of(host.begin(), host.end(), [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
    });
  }
  return std::all_of(host.begin(), host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
}

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
