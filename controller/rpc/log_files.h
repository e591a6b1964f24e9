#pragma once
// Which files `trellis logs` reads (ReadLogsRequest): the rank logs of one
// launch of one attempt, of every rank, one rank or one node's ranks, or the
// attempt's batch script output; or why there are none, naming what there
// is. And where a file's last N lines start (--tail).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/app/views.h"
#include "trellis/v1/controller.pb.h"

namespace trellis::controller {

struct LogFile {
  int rank = -1;  // -1: the batch script's output
  std::string path;
};

struct LogFiles {
  std::string dir;  // the launch's (or the attempt's, for the batch script)
  std::vector<LogFile> files;
};

// NOT_FOUND naming the attempts, launches, ranks or nodes there are, for a
// request of one that does not exist; an empty list when it exists but has
// written nothing yet.
absl::StatusOr<LogFiles> FindLogFiles(const RunView& view, const v1::ReadLogsRequest& request);

// The offset of the first of the last `lines` lines of `path` (0 when it has
// fewer).
uint64_t TailOffset(const std::string& path, int lines);

}  // namespace trellis::controller
