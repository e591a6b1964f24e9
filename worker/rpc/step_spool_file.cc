#include "worker/rpc/step_spool_file.h"

#include <google/protobuf/util/json_util.h>

#include "common/atomic_file.h"

namespace trellis::worker {

absl::Status WriteStepSpoolFile(const std::string& path,
                                const std::vector<v1::StepBatch>& batches) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string text;
  for (const v1::StepBatch& batch : batches) {
    std::string line;
    if (auto st = google::protobuf::util::MessageToJsonString(batch, &line, options); !st.ok())
      return absl::InternalError("step spool " + path + ": " + std::string(st.message()));
    text += line + "\n";
  }
  return WriteFileAtomically(path, text);
}

}  // namespace trellis::worker
