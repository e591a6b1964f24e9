#include "controller/shell/lease_rules.h"

#include <nlohmann/json.hpp>

namespace trellis::controller {

using Json = nlohmann::json;

std::string FormatLease(const LeaseHolder& h) {
  return Json{{"host", h.host},
              {"pid", h.pid},
              {"token", h.token},
              {"version", h.version},
              {"started_unix", h.started_unix},
              {"renewed_unix", h.renewed_unix},
              {"ttl_s", h.ttl_s}}
             .dump() +
         "\n";
}

absl::StatusOr<LeaseHolder> ParseLease(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  LeaseHolder h;
  for (auto [key, out] : {std::pair{"host", &h.host}, {"token", &h.token},
                          {"version", &h.version}}) {
    if (!j.contains(key) || !j[key].is_string())
      return absl::InvalidArgumentError(std::string("no \"") + key + "\" string");
    *out = j[key].get<std::string>();
  }
  for (auto [key, out] : {std::pair{"pid", &h.pid}, {"started_unix", &h.started_unix},
                          {"renewed_unix", &h.renewed_unix}, {"ttl_s", &h.ttl_s}}) {
    if (!j.contains(key) || !j[key].is_number_integer())
      return absl::InvalidArgumentError(std::string("no \"") + key + "\" integer");
    *out = j[key].get<int64_t>();
  }
  if (h.host.empty() || h.token.empty() || h.ttl_s <= 0)
    return absl::InvalidArgumentError("empty host or token, or ttl_s not positive");
  return h;
}

LeaseVerdict JudgeLease(const LeaseFound& found, const std::string& my_host, int64_t now_unix) {
  if (!found.exists) return LeaseVerdict::kFree;
  // A file that does not parse was not written by a controller that renews
  // it (every write is whole, by rename); it may still be a newer format, so
  // watch it before taking it.
  if (!found.holder) return LeaseVerdict::kWatch;
  const LeaseHolder& h = *found.holder;
  const bool expired = now_unix - h.renewed_unix >= h.ttl_s;
  if (h.host == my_host) {
    // One clock: a dead pid, or one that stopped renewing (hung, or a pid
    // reused after a reboot), has let go.
    return found.holder_pid_alive && !expired ? LeaseVerdict::kLive : LeaseVerdict::kStale;
  }
  return expired ? LeaseVerdict::kWatch : LeaseVerdict::kLive;
}

std::string DescribeHolder(const LeaseHolder& h, int64_t now_unix) {
  return "host " + h.host + ", pid " + std::to_string(h.pid) + ", renewed " +
         std::to_string(now_unix - h.renewed_unix) + " s ago (version " + h.version + ")";
}

}  // namespace trellis::controller
