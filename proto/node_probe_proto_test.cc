#include "proto/node_probe_proto.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

TEST(NodeProbeProtoTest, NodeProbeRoundTrip) {
  NodeProbe probe;
  SocketProbe s;
  s.numa_node = 1;
  s.cpulist = "72-143";
  s.total_bytes = 500;
  s.free_bytes = 400;
  s.file_pages_bytes = 10;
  s.anon_pages_bytes = 20;
  s.slab_bytes = 30;
  s.kernel_stack_bytes = 4;
  s.page_tables_bytes = 5;
  s.shmem_bytes = 6;
  s.hugepages_bytes = 7;
  s.unattributed_bytes = 24;
  s.touch_obtainable_bytes = 300;
  probe.sockets.push_back(s);
  probe.sockets.push_back(SocketProbe{});  // no touch figure
  probe.device_nodes.push_back({4, 1000, 900});
  probe.error = "memory probe, socket 1: mmap failed";
  probe.probed_unix_ms = 1700000000123;

  v1::NodeProbe p;
  ToProto(probe, &p);
  EXPECT_FALSE(p.sockets(1).has_touch_obtainable_bytes());
  NodeProbe back = FromProto(p);
  ASSERT_EQ(back.sockets.size(), 2u);
  const SocketProbe& b = back.sockets[0];
  EXPECT_EQ(b.numa_node, 1);
  EXPECT_EQ(b.cpulist, "72-143");
  EXPECT_EQ(b.total_bytes, 500);
  EXPECT_EQ(b.free_bytes, 400);
  EXPECT_EQ(b.file_pages_bytes, 10);
  EXPECT_EQ(b.anon_pages_bytes, 20);
  EXPECT_EQ(b.slab_bytes, 30);
  EXPECT_EQ(b.kernel_stack_bytes, 4);
  EXPECT_EQ(b.page_tables_bytes, 5);
  EXPECT_EQ(b.shmem_bytes, 6);
  EXPECT_EQ(b.hugepages_bytes, 7);
  EXPECT_EQ(b.unattributed_bytes, 24);
  EXPECT_EQ(b.touch_obtainable_bytes, 300);
  EXPECT_FALSE(back.sockets[1].touch_obtainable_bytes);
  ASSERT_EQ(back.device_nodes.size(), 1u);
  EXPECT_EQ(back.device_nodes[0].numa_node, 4);
  EXPECT_EQ(back.device_nodes[0].total_bytes, 1000);
  EXPECT_EQ(back.device_nodes[0].free_bytes, 900);
  EXPECT_EQ(back.error, probe.error);
  EXPECT_EQ(back.probed_unix_ms, 1700000000123);
}

}  // namespace
}  // namespace trellis
