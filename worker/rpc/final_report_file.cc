#include "worker/rpc/final_report_file.h"

#include <google/protobuf/util/json_util.h>

#include "common/atomic_file.h"

namespace trellis::worker {

absl::Status WriteFinalReportFile(const std::string& path, v1::ReportExitRequest report) {
  report.mutable_id()->clear_secret();  // the run directory is the user's
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (auto st = google::protobuf::util::MessageToJsonString(report, &json, options); !st.ok())
    return absl::InternalError("final report: " + std::string(st.message()));
  return WriteFileAtomically(path, json + "\n");
}

}  // namespace trellis::worker
