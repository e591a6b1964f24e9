#include "controller/rpc/step_spool_file.h"

#include <google/protobuf/util/json_util.h>

#include "controller/rpc/run_dir_file.h"
#include "proto/step_record_proto.h"
#include "trellis/v1/agent.pb.h"

namespace trellis::controller {

namespace {
// max_queued_reports' ceiling's worth of records, with room.
constexpr int64_t kMaxSpoolBytes = int64_t{256} << 20;
}  // namespace

absl::StatusOr<std::vector<StepBatch>> ReadStepSpoolFile(const std::string& path,
                                                         const BatchSource& source) {
  absl::StatusOr<std::string> text = ReadRunDirFile(path, kMaxSpoolBytes);
  if (!text.ok()) return text.status();
  std::vector<StepBatch> batches;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a newer worker's fields
  size_t at = 0;
  for (int line_no = 1; at < text->size(); ++line_no) {
    size_t end = text->find('\n', at);
    if (end == std::string::npos) end = text->size();
    const std::string line = text->substr(at, end - at);
    at = end + 1;
    if (line.empty()) continue;
    const std::string where = path + " line " + std::to_string(line_no);
    v1::StepBatch in;
    if (!google::protobuf::util::JsonStringToMessage(line, &in, options).ok())
      return absl::DataLossError(where + ": not a step batch (StepBatch as JSON)");
    if (in.steps_size() > static_cast<int>(kMaxBatchRecords))
      return absl::DataLossError(where + ": " + std::to_string(in.steps_size()) +
                                 " records, at most " + std::to_string(kMaxBatchRecords));
    StepBatch batch;
    batch.source = source;
    batch.seq = in.seq();
    for (const v1::RankStep& r : in.steps())
      batch.records.push_back({r.rank(), trellis::FromProto(r.record())});
    if (auto refusal = CheckBatch(batch)) return absl::DataLossError(where + ": " + refusal->error);
    batches.push_back(std::move(batch));
  }
  return batches;
}

}  // namespace trellis::controller
