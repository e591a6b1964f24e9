#pragma once
// Paths inside a run's directory that the controller and the workers share
// (docs/architecture.md, "A launch that runs while the controller restarts").

#include <string>

namespace trellis {

// A worker's final report on its launch, written before it is sent, so that
// a controller that could not be reached learns it after its restart:
// "<run_dir>/attempt-A/launch-L/final-report-<node>.json", the
// ReportExitRequest in protobuf's JSON form, without the secret.
inline std::string FinalReportPath(const std::string& run_dir, int attempt, int launch,
                                   const std::string& node) {
  return run_dir + "/attempt-" + std::to_string(attempt) + "/launch-" + std::to_string(launch) +
         "/final-report-" + node + ".json";
}

// The step batches a worker could not get stored before it exited (the
// controller unreachable, or its disk full), one JSON StepBatch per line,
// kept until the controller stores them:
// "<run_dir>/attempt-A/launch-L/steps-spool-<node>.jsonl".
inline std::string StepSpoolPath(const std::string& run_dir, int attempt, int launch,
                                 const std::string& node) {
  return run_dir + "/attempt-" + std::to_string(attempt) + "/launch-" + std::to_string(launch) +
         "/steps-spool-" + node + ".jsonl";
}

}  // namespace trellis
