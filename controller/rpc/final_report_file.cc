#include "controller/rpc/final_report_file.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/run_layout.h"
#include "controller/rpc/app_proto.h"
#include "controller/rpc/validate.h"

namespace trellis::controller {

namespace {

constexpr off_t kMaxReportBytes = 1 << 20;

// The file's text: a regular file, not a link (the run directory is the user's).
absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(path + ": no such file");
    return absl::FailedPreconditionError(path + ": " + std::strerror(errno) +
                                         (errno == ELOOP ? " (a link: not read)" : ""));
  }
  struct stat st {};
  std::string text;
  absl::Status status;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = absl::FailedPreconditionError(path + ": not a regular file");
  } else if (st.st_size > kMaxReportBytes) {
    status = absl::FailedPreconditionError(path + ": " + std::to_string(st.st_size) +
                                           " bytes, at most 1 MiB accepted");
  } else {
    text.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < text.size()) {  // a network file system may read it in parts
      ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got != text.size()) status = absl::UnavailableError(path + ": short read");
  }
  ::close(fd);
  if (!status.ok()) return status;
  return text;
}

}  // namespace

absl::StatusOr<WorkerReport> ReadFinalReportFile(const std::string& run_dir, const WorkerId& id) {
  const std::string path = FinalReportPath(run_dir, id.attempt, id.launch, id.node);
  absl::StatusOr<std::string> text = ReadSmallFile(path);
  if (!text.ok()) return text.status();
  v1::ReportExitRequest req;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a newer worker's fields
  if (!google::protobuf::util::JsonStringToMessage(*text, &req, options).ok())
    return absl::DataLossError(path + ": not a final report (ReportExitRequest as JSON)");
  const v1::WorkerIdentity& who = req.id();
  if (who.run_id() != id.run_id || who.attempt() != id.attempt || who.launch() != id.launch ||
      who.node() != id.node)
    return absl::DataLossError(path + ": the report of another worker (its run, attempt, "
                               "launch or node differ)");
  req.mutable_id()->set_secret("-");  // not in the file; every other field checked as sent
  if (grpc::Status st = Check(req); !st.ok())
    return absl::DataLossError(path + ": " + st.error_message());
  return FromProto(req);
}

}  // namespace trellis::controller
