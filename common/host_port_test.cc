#include "common/host_port.h"

#include <gtest/gtest.h>

#include <string>

namespace trellis {
namespace {

TEST(HostPortTest, HostPortAddressesOnly) {
  for (const char* ok : {"host-node1:9400", "10.0.0.5:1", "[fe80::1]:65535", "a.b_c-d:80"})
    EXPECT_TRUE(IsHostPort(ok)) << ok;
  for (const char* bad : {"", "host", ":9400", "host:", "host:0", "host:65536", "host:9x",
                          "ho st:80", "host:80/metrics", "[zz]:80", "[]:80", "a:b:c"})
    EXPECT_FALSE(IsHostPort(bad)) << bad;
  EXPECT_TRUE(IsHostPort("127.0.0.1:0", /*min_port=*/0));
  EXPECT_TRUE(IsHostPort(std::string(250, 'h') + ":9400"));
  EXPECT_FALSE(IsHostPort(std::string(251, 'h') + ":9400")) << "256 characters";
}

}  // namespace
}  // namespace trellis
