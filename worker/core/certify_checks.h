#pragma once
// `trellis-worker check --certify`: the check a node passes to leave the
// controller's quarantine (docs/architecture.md, "Quarantine"), on top of
// the node checks of node_checks.h: memory touched on each NUMA node (the
// touch probe), a CPU computation with a known answer, and a last line that
// sums them up, which the controller shows in `trellis nodes`. Pure: the
// shell (worker/app/check.cc) runs the probes.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/check_line.h"

namespace trellis::worker {

// What the touch probe reached on one NUMA node.
struct TouchFacts {
  int numa_node = 0;
  int64_t asked_bytes = 0;
  int64_t touched_bytes = 0;
  std::string stopped_by;  // the probe's word: "bound", "time budget", ...
};
// "touch N": fails when less than asked was touched; a node this machine's
// libnuma lacks (a stand-in sysfs tree) is skipped.
CheckLine TouchCheck(int numa_node, const absl::StatusOr<TouchFacts>& touched);

// A CPU computation whose answer is known in closed form: sum of k^2 for
// k = 1..n (integers) and of 1/(k(k+1)) (doubles, telescoping to 1 - 1/(n+1)).
struct ComputeFacts {
  uint64_t squares = 0;
  double telescoped = 0;
  int64_t n = 0;
};
ComputeFacts ComputeKnownAnswer(int64_t n);
// "cpu compute": ok when both sums are right.
CheckLine ComputeCheck(const ComputeFacts& got);

// The last line: "certify: passed (N checks, M skipped)" or
// "certify: FAILED: <first failed check>: <its detail>".
std::string CertifySummary(const std::vector<CheckLine>& lines);

}  // namespace trellis::worker
