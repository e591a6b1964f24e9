#include "controller/rpc/final_report_file.h"

#include <google/protobuf/util/json_util.h>

#include "common/run_layout.h"
#include "controller/rpc/app_proto.h"
#include "controller/rpc/run_dir_file.h"
#include "controller/rpc/validate.h"

namespace trellis::controller {


absl::StatusOr<WorkerReport> ReadFinalReportFile(const std::string& run_dir, const WorkerId& id) {
  const std::string path = FinalReportPath(run_dir, id.attempt, id.launch, id.node);
  absl::StatusOr<std::string> text = ReadRunDirFile(path, 1 << 20);
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
