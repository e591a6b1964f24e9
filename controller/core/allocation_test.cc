#include "controller/core/allocation.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

using std::chrono::seconds;

TEST(AllocationTest, SlurmsHostlistIsExpanded) {
  auto a = AllocationOf("node[1-2],gpu07");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->nodes.size(), 3u);
  EXPECT_TRUE(a->nodes.count("gpu07"));
  EXPECT_EQ(a->nodelist, "node[1-2],gpu07");
  auto none = AllocationOf("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->nodes.empty()) << "a job that is not running has no nodes";
  EXPECT_FALSE(AllocationOf("node[1-").ok());
}

TEST(AllocationTest, AClaimIsDecidedFromSlurmsLastAnswer) {
  Allocation a = *AllocationOf("node[1-2]");
  const seconds reask{10};
  struct Case {
    const Allocation* known;
    std::string node;
    bool fresh;
    seconds since;
    NodeClaim want;
  } cases[] = {
      {nullptr, "node1", false, seconds(0), NodeClaim::kAsk},    // nothing known yet
      {&a, "node1", false, seconds(0), NodeClaim::kInside},
      {&a, "node1", false, seconds(99), NodeClaim::kInside},     // inside never expires
      {&a, "node9", false, seconds(3), NodeClaim::kOutside},     // a recent answer stands
      {&a, "node9", false, seconds(10), NodeClaim::kAsk},        // an old one is asked again
      {&a, "node1", true, seconds(0), NodeClaim::kAsk},          // a requeue's new allocation
  };
  for (const Case& c : cases)
    EXPECT_EQ(JudgeNodeClaim(c.known, c.node, c.fresh, c.since, reask), c.want)
        << c.node << " fresh=" << c.fresh << " since=" << c.since.count();
}

TEST(AllocationTest, TheRefusalNamesTheNodeTheJobAndItsAllocation) {
  absl::Status st = OutsideAllocation("node9", "100", *AllocationOf("node[1-2]"));
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(st.message(),
            "id.node: node9 is not in the allocation of Slurm job 100 (node[1-2]); a worker acts "
            "only for a node of its attempt's job");
  st = OutsideAllocation("node9", "100", *AllocationOf(""));
  EXPECT_NE(st.message().find("(no nodes: the job is not running)"), std::string::npos);
  std::string long_list = "n[1-5000]";
  for (int i = 0; i < 50; ++i) long_list += ",host" + std::to_string(i);
  st = OutsideAllocation("x", "7", *AllocationOf(long_list));
  EXPECT_LT(st.message().size(), 400u) << "a long hostlist is cut";
}

}  // namespace
}  // namespace trellis::controller
