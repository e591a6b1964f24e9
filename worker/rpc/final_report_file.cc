#include "worker/rpc/final_report_file.h"

#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace trellis::worker {

absl::Status WriteFinalReportFile(const std::string& path, v1::ReportExitRequest report) {
  report.mutable_id()->clear_secret();  // the run directory is the user's
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (auto st = google::protobuf::util::MessageToJsonString(report, &json, options); !st.ok())
    return absl::InternalError("final report: " + std::string(st.message()));
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json << "\n";
    out.flush();
    if (!out) return absl::UnavailableError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::UnavailableError("cannot rename " + tmp + " to " + path);
  }
  return absl::OkStatus();
}

}  // namespace trellis::worker
