#include "worker/rpc/convert.h"

namespace trellis::worker {

void ToProto(const StepRecord& in, v1::StepRecord* out) {
  out->set_step(in.step);
  out->set_loss(in.loss);
  out->set_tokens(in.tokens);
  out->set_step_seconds(in.step_seconds);
  if (in.grad_norm) out->set_grad_norm(*in.grad_norm);
  if (in.fwd_seconds) out->set_fwd_seconds(*in.fwd_seconds);
  if (in.bwd_seconds) out->set_bwd_seconds(*in.bwd_seconds);
  if (in.optim_seconds) out->set_optim_seconds(*in.optim_seconds);
  if (in.comm_seconds) out->set_comm_seconds(*in.comm_seconds);
  if (in.exposed_comm_seconds) out->set_exposed_comm_seconds(*in.exposed_comm_seconds);
  if (in.alloc_retries) out->set_alloc_retries(*in.alloc_retries);
  if (in.mem_allocated_peak_bytes) out->set_mem_allocated_peak_bytes(*in.mem_allocated_peak_bytes);
  if (in.mem_reserved_peak_bytes) out->set_mem_reserved_peak_bytes(*in.mem_reserved_peak_bytes);
  if (in.host_arena_bytes) out->set_host_arena_bytes(*in.host_arena_bytes);
  if (in.nccl_max_ctas) out->set_nccl_max_ctas(*in.nccl_max_ctas);
  if (in.checkpoint_step) out->set_checkpoint_step(*in.checkpoint_step);
}

void ToProto(const RankExit& in, v1::RankExit* out) {
  out->set_rank(in.rank);
  out->set_exit_code(in.exit_code);
  out->set_after_stop(in.after_stop);
  out->set_signal(in.signal);
  for (const std::string& m : in.markers) out->add_markers(m);
  out->set_evidence(in.evidence);
}

void ToProto(const NodeProbeReport& in, v1::NodeProbe* out) {
  for (const SocketMemory& s : in.result.sockets) {
    v1::SocketProbe* p = out->add_sockets();
    p->set_numa_node(s.numa_node);
    p->set_cpulist(s.cpulist);
    p->set_total_bytes(s.total_bytes);
    p->set_free_bytes(s.free_bytes);
    p->set_file_pages_bytes(s.file_pages_bytes);
    p->set_anon_pages_bytes(s.anon_pages_bytes);
    p->set_slab_bytes(s.slab_bytes);
    p->set_kernel_stack_bytes(s.kernel_stack_bytes);
    p->set_page_tables_bytes(s.page_tables_bytes);
    p->set_shmem_bytes(s.shmem_bytes);
    p->set_hugepages_bytes(s.hugepages_bytes);
    p->set_unattributed_bytes(s.unattributed_bytes);
    if (s.touch_obtainable_bytes) p->set_touch_obtainable_bytes(*s.touch_obtainable_bytes);
  }
  for (const DeviceMemory& d : in.result.device_nodes) {
    v1::DeviceMemoryProbe* p = out->add_device_nodes();
    p->set_numa_node(d.numa_node);
    p->set_total_bytes(d.total_bytes);
    p->set_free_bytes(d.free_bytes);
  }
  out->set_error(in.error);
  out->set_probed_unix_ms(in.probed_unix_ms);
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
  go.checkpoint_dir = in.checkpoint_dir();
  return go;
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace trellis::worker
