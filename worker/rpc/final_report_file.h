#pragma once
// The worker's final report as a file in its launch's directory
// (FinalReportPath, common/run_layout.h): written before the report is sent,
// it tells a controller restarted after the worker gave up that the node
// finished, and how its ranks ended.

#include <string>

#include "absl/status/status.h"
#include "trellis/v1/agent.pb.h"

namespace trellis::worker {

// Writes `report` without its secret to `path`, atomically
// (common/atomic_file.h).
absl::Status WriteFinalReportFile(const std::string& path, v1::ReportExitRequest report);

}  // namespace trellis::worker
