#include "worker/rpc/agent_proto.h"

namespace trellis::worker {

void ToProto(const RankExit& in, v1::RankExit* out) {
  out->set_rank(in.rank);
  out->set_exit_code(in.exit_code);
  out->set_after_stop(in.after_stop);
  out->set_signal(in.signal);
  for (const std::string& m : in.markers) out->add_markers(m);
  out->set_evidence(in.evidence);
}

GoDecision GoFromProto(const v1::GateDecision& in) {
  GoDecision go;
  go.node_index = in.node_index();
  go.rank_offset = in.rank_offset();
  go.ranks_per_node = in.ranks_per_node();
  go.world_size = in.world_size();
  go.master_addr = in.master_addr();
  go.master_port = in.master_port();
  go.resume_step = in.resume_step();
  go.mtbf_s = in.mtbf_seconds();
  go.checkpoint_dir = in.checkpoint_dir();
  go.data_roots.assign(in.data_roots().begin(), in.data_roots().end());
  return go;
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace trellis::worker
