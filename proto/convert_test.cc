#include "proto/convert.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

TEST(ProtoConvertTest, StepRecordRoundTripKeepsAbsentOptionalsAbsent) {
  StepRecord r;
  r.step = 7;
  r.loss = 2.5;
  r.tokens = 4096;
  r.step_seconds = 0.25;
  r.grad_norm = 1.5;
  r.alloc_retries = 0;  // present though zero
  r.checkpoint_step = 6;
  r.expert_load_max_over_mean = 1.25;  // a MoE record without EP (no ep_load_max_over_mean)
  r.checkpoint_seconds = 0.0;  // present though zero
  v1::StepRecord p;
  ToProto(r, &p);
  EXPECT_FALSE(p.has_fwd_seconds());
  EXPECT_TRUE(p.has_checkpoint_seconds());
  EXPECT_EQ(p.expert_load_max_over_mean(), 1.25);
  EXPECT_FALSE(p.has_ep_load_max_over_mean());
  EXPECT_TRUE(p.has_alloc_retries());
  StepRecord back = FromProto(p);
  EXPECT_EQ(EncodeStepRecord(back), EncodeStepRecord(r));
  EXPECT_FALSE(back.fwd_seconds);
  EXPECT_EQ(back.alloc_retries, 0);
  EXPECT_EQ(back.checkpoint_seconds, 0.0);
  EXPECT_FALSE(back.ep_load_max_over_mean);
  p.set_mem_allocated_peak_bwd_bytes(int64_t{5} << 30);
  EXPECT_EQ(FromProto(p).mem_allocated_peak_bwd_bytes, int64_t{5} << 30);
  EXPECT_FALSE(FromProto(p).mem_allocated_peak_fwd_bytes);
  p.set_ep_load_max_over_mean(1.0);
  EXPECT_EQ(FromProto(p).ep_load_max_over_mean, 1.0);
  p.clear_checkpoint_seconds();
  EXPECT_FALSE(FromProto(p).checkpoint_seconds);
}

TEST(ProtoConvertTest, NodeProbeRoundTrip) {
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
