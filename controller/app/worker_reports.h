#pragma once
// A worker's final report on its launch, as the store keeps it
// (WorkerReportRecord), and back: a controller started again reads which
// nodes of a running launch finished before it, and how their ranks ended
// (launch_resume.cc).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/app/views.h"
#include "controller/store/records.h"

namespace trellis::controller {

struct WorkerReport {
  std::vector<RankExitInfo> ranks;
  int oom_kills = -1;  // -1: not measured
  bool time_limit_warned = false;
  int exit_code = 0;
  std::string reason;
  // Step records the worker exited without getting stored, kept in its spool
  // file (common/run_layout.h) for the controller to store.
  int64_t unstored_step_records = 0;
};

WorkerReportRecord WorkerReportRecordOf(const WorkerId& id, WallTime time,
                                        const WorkerReport& report);
// A record whose ranks are not the JSON WorkerReportRecordOf writes is DataLoss.
absl::StatusOr<WorkerReport> WorkerReportFromRecord(const WorkerReportRecord& record);

}  // namespace trellis::controller
