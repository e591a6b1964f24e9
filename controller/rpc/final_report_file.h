#pragma once
// A worker's final report read from its file in the launch's directory
// (FinalReportPath, common/run_layout.h), for a launch resumed after a
// controller restart whose worker could not reach the controller to send it.

#include <string>

#include "absl/status/statusor.h"
#include "controller/app/views.h"
#include "controller/app/worker_reports.h"

namespace trellis::controller {

// NotFound when there is no file; otherwise the report, checked as the
// ReportExit call is (validate.h), and for the worker `id` (its run, attempt,
// launch and node; the file carries no secret). A link, a file over 1 MiB
// or one that is not such a report is an error naming the path.
absl::StatusOr<WorkerReport> ReadFinalReportFile(const std::string& run_dir, const WorkerId& id);

}  // namespace trellis::controller
