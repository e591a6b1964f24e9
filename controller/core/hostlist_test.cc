#include "controller/core/hostlist.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

TEST(HostlistTest, ExpandsRangesKeepsWidthsAndRefusesBadOnes) {
  EXPECT_EQ(*ExpandHostlist("node[1-3,5],gpu7"),
            (std::vector<std::string>{"node1", "node2", "node3", "node5", "gpu7"}));
  EXPECT_EQ(*ExpandHostlist("n[08-10]"), (std::vector<std::string>{"n08", "n09", "n10"}));
  EXPECT_EQ(*ExpandHostlist("single"), std::vector<std::string>{"single"});
  EXPECT_TRUE(ExpandHostlist("")->empty());
  EXPECT_FALSE(ExpandHostlist("n[1-").ok());
  EXPECT_FALSE(ExpandHostlist("n[5-2]").ok());
  EXPECT_FALSE(ExpandHostlist("n[1-999999]").ok());
}

}  // namespace
}  // namespace trellis::controller
