#pragma once
// One controller per state directory (docs/architecture.md, "A controller that
// outlives its login node"): the lease file's content and the pure judgement
// of a lease found there. The file I/O and the renewing are controller/shell/
// lease.h's.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace trellis::controller {

struct LeaseHolder {
  std::string host;
  int64_t pid = 0;
  std::string token;  // random: tells this controller's lease from a successor's
  std::string version;
  int64_t started_unix = 0;
  int64_t renewed_unix = 0;  // the holder's clock
  int64_t ttl_s = 0;         // the holder promises to renew well within this
};

std::string FormatLease(const LeaseHolder& h);
absl::StatusOr<LeaseHolder> ParseLease(const std::string& text);

// What to make of the lease file a starting controller finds.
enum class LeaseVerdict {
  kFree,   // no lease: create it
  kLive,   // held: refuse to start, naming the holder
  kStale,  // the holder is gone: take it over
  // Looks expired by this host's clock, but the holder is elsewhere and the
  // two clocks may disagree: read it again after a watch and take it only
  // when it did not change.
  kWatch,
};

struct LeaseFound {
  bool exists = false;
  std::optional<LeaseHolder> holder;  // empty when the file does not parse
  // Only for a holder on this host: whether its pid is alive.
  bool holder_pid_alive = false;
};

LeaseVerdict JudgeLease(const LeaseFound& found, const std::string& my_host, int64_t now_unix);

// "host login1, pid 4242, renewed 3 s ago (version 1.2.3)".
std::string DescribeHolder(const LeaseHolder& h, int64_t now_unix);

}  // namespace trellis::controller
