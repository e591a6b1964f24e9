#include "proto/node_probe_proto.h"

#include <utility>

namespace trellis {

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
