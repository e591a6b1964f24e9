#include "worker/core/certify_checks.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trellis::worker {

namespace {
using CertVerdict = CheckLine::Verdict;
std::string CertifyGib(int64_t bytes) {
  return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / (1 << 30));
}
} // namespace

CheckLine TouchCheck(int numa_node, const absl::StatusOr<TouchFacts> &t) {
  const std::string name = absl::StrCat("touch ", numa_node);
  if (!t.ok()) {
    // The node is in sysfs but not in this machine's libnuma: a stand-in tree.
    if (t.status().code() == absl::StatusCode::kFailedPrecondition)
      return {name, CertVerdict::kSkip, std::string(t.status().message())};
    return {name, CertVerdict::kFail, std::string(t.status().message())};
  }
  if (t->touched_bytes < t->asked_bytes)
    return {name, CertVerdict::kFail,
            absl::StrCat("touched ", CertifyGib(t->touched_bytes), " of ",
                         CertifyGib(t->asked_bytes), " asked on NUMA node ",
                         numa_node, " (stopped by ", t->stopped_by,
                         "): memory there cannot be had")};
  return {name, CertVerdict::kOk,
          absl::StrCat(CertifyGib(t->touched_bytes), " touched on NUMA node ",
                       numa_node)};
}

ComputeFacts ComputeKnownAnswer(int64_t n) {
  ComputeFacts f;
  f.n = n;
  for (int64_t k = 1; k <= n; ++k) {
    f.squares += static_cast<uint64_t>(k) * static_cast<uint64_t>(k);
    f.telescoped += 1.0 / (static_cast<double>(k) * static_cast<double>(k + 1));
  }
  return f;
}

CheckLine ComputeCheck(const ComputeFacts &got) {
  const auto n = static_cast<uint64_t>(got.n);
  const uint64_t squares = n * (n + 1) * (2 * n + 1) / 6;
  const double telescoped = 1.0 - 1.0 / (static_cast<double>(n) + 1.0);
  if (got.squares != squares || std::fabs(got.telescoped - telescoped) > 1e-9)
    return {"cpu compute", CertVerdict::kFail,
            absl::StrCat("wrong answers over ", got.n,
                         " terms: sum of squares ", got.squares, " (expected ",
                         squares, "), telescoped ",
                         absl::StrFormat("%.12f", got.telescoped),
                         " (expected ", absl::StrFormat("%.12f", telescoped),
                         "): this CPU miscomputes")};
  return {"cpu compute", CertVerdict::kOk,
          absl::StrCat("known answers over ", got.n, " terms")};
}

std::string CertifySummary(const std::vector<CheckLine> &lines) {
  int skipped = 0;
  for (const CheckLine &l : lines) {
    if (l.verdict == CertVerdict::kFail)
      return absl::StrCat("certify: FAILED: ", l.name, ": ", l.detail);
    if (l.verdict == CertVerdict::kSkip)
      ++skipped;
  }
  return absl::StrCat("certify: passed (", lines.size(), " checks, ", skipped,
                      " skipped)");
}

} // namespace trellis::worker
