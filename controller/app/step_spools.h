#pragma once
// The step spools this controller still has to store (docs/architecture.md,
// "The step pipeline"): the batches a worker could not get stored before it
// exited (the controller unreachable, or its disk full) wait in a file in the
// launch's directory (StepSpoolPath, common/run_layout.h). Each is read and
// sent through the ingester like a stream's batches (a batch stored before is
// a duplicate), and the file is removed once all of it is stored; until then
// it is tried again with every call to TryAll, and the run's view counts its
// records as not yet stored. Loop thread only.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/app/ingester.h"
#include "controller/core/step_batch.h"

namespace trellis::controller {

class StepSpools {
 public:
  using Read = std::function<absl::StatusOr<std::vector<StepBatch>>(const std::string& path,
                                                                    const BatchSource& source)>;
  // The ingester's Submit: false when it takes nothing now.
  using Submit = std::function<bool(StepBatch, Ingester::Done)>;
  // Runs a function on the loop thread (the ingester answers on its own).
  using Post = std::function<void(std::function<void()>)>;

  StepSpools(Read read, Submit submit, Post post)
      : read_(std::move(read)), submit_(std::move(submit)), post_(std::move(post)) {}

  // A worker's spool under `run_dir` (its final report said so): tried now.
  void Add(const std::string& run_dir, const BatchSource& source);
  // The spools left under these runs' directories (at start-up).
  void Scan(const std::string& run_id, const std::string& run_dir);
  // Tries every spool not being stored now (an unreadable one only when
  // named again by Add or Scan).
  void TryAll();

  // Records not yet stored: of one run, of all.
  int64_t Pending(const std::string& run_id) const;
  int64_t Total() const;

 private:
  struct Spool {
    std::string path;
    int64_t records = -1;  // -1: not read yet
    bool in_flight = false;
    bool unreadable = false;  // its last read failed
  };
  void Try(const BatchSource& source, Spool& spool);
  void Answered(const BatchSource& source, bool stored);

  Read read_;
  Submit submit_;
  Post post_;
  std::map<BatchSource, Spool> spools_;
  // Per spool being stored: batches not yet answered, and whether all were stored.
  struct Flight {
    size_t left = 0;
    bool all_stored = true;
  };
  std::map<BatchSource, Flight> flights_;
};

}  // namespace trellis::controller
