#include "proto/convert.h"

#include <utility>

namespace trellis {

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
  if (in.expert_load_max_over_mean)
    out->set_expert_load_max_over_mean(*in.expert_load_max_over_mean);
  if (in.ep_load_max_over_mean) out->set_ep_load_max_over_mean(*in.ep_load_max_over_mean);
  if (in.alloc_retries) out->set_alloc_retries(*in.alloc_retries);
  if (in.mem_allocated_peak_bytes) out->set_mem_allocated_peak_bytes(*in.mem_allocated_peak_bytes);
  if (in.mem_reserved_peak_bytes) out->set_mem_reserved_peak_bytes(*in.mem_reserved_peak_bytes);
  if (in.mem_allocated_peak_fwd_bytes)
    out->set_mem_allocated_peak_fwd_bytes(*in.mem_allocated_peak_fwd_bytes);
  if (in.mem_allocated_peak_bwd_bytes)
    out->set_mem_allocated_peak_bwd_bytes(*in.mem_allocated_peak_bwd_bytes);
  if (in.mem_allocated_peak_optim_bytes)
    out->set_mem_allocated_peak_optim_bytes(*in.mem_allocated_peak_optim_bytes);
  if (in.host_arena_bytes) out->set_host_arena_bytes(*in.host_arena_bytes);
  if (in.nccl_max_ctas) out->set_nccl_max_ctas(*in.nccl_max_ctas);
  if (in.checkpoint_step) out->set_checkpoint_step(*in.checkpoint_step);
  if (in.checkpoint_seconds) out->set_checkpoint_seconds(*in.checkpoint_seconds);
}

StepRecord FromProto(const v1::StepRecord& in) {
  StepRecord r;
  r.step = in.step();
  r.loss = in.loss();
  r.tokens = in.tokens();
  r.step_seconds = in.step_seconds();
  if (in.has_grad_norm()) r.grad_norm = in.grad_norm();
  if (in.has_fwd_seconds()) r.fwd_seconds = in.fwd_seconds();
  if (in.has_bwd_seconds()) r.bwd_seconds = in.bwd_seconds();
  if (in.has_optim_seconds()) r.optim_seconds = in.optim_seconds();
  if (in.has_comm_seconds()) r.comm_seconds = in.comm_seconds();
  if (in.has_exposed_comm_seconds()) r.exposed_comm_seconds = in.exposed_comm_seconds();
  if (in.has_expert_load_max_over_mean())
    r.expert_load_max_over_mean = in.expert_load_max_over_mean();
  if (in.has_ep_load_max_over_mean()) r.ep_load_max_over_mean = in.ep_load_max_over_mean();
  if (in.has_alloc_retries()) r.alloc_retries = in.alloc_retries();
  if (in.has_mem_allocated_peak_bytes()) r.mem_allocated_peak_bytes = in.mem_allocated_peak_bytes();
  if (in.has_mem_reserved_peak_bytes()) r.mem_reserved_peak_bytes = in.mem_reserved_peak_bytes();
  if (in.has_mem_allocated_peak_fwd_bytes())
    r.mem_allocated_peak_fwd_bytes = in.mem_allocated_peak_fwd_bytes();
  if (in.has_mem_allocated_peak_bwd_bytes())
    r.mem_allocated_peak_bwd_bytes = in.mem_allocated_peak_bwd_bytes();
  if (in.has_mem_allocated_peak_optim_bytes())
    r.mem_allocated_peak_optim_bytes = in.mem_allocated_peak_optim_bytes();
  if (in.has_host_arena_bytes()) r.host_arena_bytes = in.host_arena_bytes();
  if (in.has_nccl_max_ctas()) r.nccl_max_ctas = in.nccl_max_ctas();
  if (in.has_checkpoint_step()) r.checkpoint_step = in.checkpoint_step();
  if (in.has_checkpoint_seconds()) r.checkpoint_seconds = in.checkpoint_seconds();
  return r;
}

void ToProto(const NodeProbe& in, v1::NodeProbe* out) {
  for (const SocketProbe& s : in.sockets) {
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
  for (const DeviceMemoryProbe& d : in.device_nodes) {
    v1::DeviceMemoryProbe* p = out->add_device_nodes();
    p->set_numa_node(d.numa_node);
    p->set_total_bytes(d.total_bytes);
    p->set_free_bytes(d.free_bytes);
  }
  out->set_error(in.error);
  out->set_probed_unix_ms(in.probed_unix_ms);
}

NodeProbe FromProto(const v1::NodeProbe& in) {
  NodeProbe out;
  for (const v1::SocketProbe& p : in.sockets()) {
    SocketProbe s;
    s.numa_node = p.numa_node();
    s.cpulist = p.cpulist();
    s.total_bytes = p.total_bytes();
    s.free_bytes = p.free_bytes();
    s.file_pages_bytes = p.file_pages_bytes();
    s.anon_pages_bytes = p.anon_pages_bytes();
    s.slab_bytes = p.slab_bytes();
    s.kernel_stack_bytes = p.kernel_stack_bytes();
    s.page_tables_bytes = p.page_tables_bytes();
    s.shmem_bytes = p.shmem_bytes();
    s.hugepages_bytes = p.hugepages_bytes();
    s.unattributed_bytes = p.unattributed_bytes();
    if (p.has_touch_obtainable_bytes()) s.touch_obtainable_bytes = p.touch_obtainable_bytes();
    out.sockets.push_back(std::move(s));
  }
  for (const v1::DeviceMemoryProbe& p : in.device_nodes())
    out.device_nodes.push_back({p.numa_node(), p.total_bytes(), p.free_bytes()});
  out.error = in.error();
  out.probed_unix_ms = in.probed_unix_ms();
  return out;
}

}  // namespace trellis
