#include "worker/io/node_info.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace trellis::worker {
namespace {

TEST(NodeInfoTest, CountsOnlyNumberedGpuDevices) {
  char tmpl[] = "/tmp/trellis-dev-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dev = tmpl;
  for (const char* name : {"nvidia0", "nvidia1", "nvidia12", "nvidiactl", "nvidia-uvm",
                           "nvidia-caps", "nvme0", "null"})
    std::ofstream(dev + "/" + name) << "";
  EXPECT_EQ(CountGpus(dev), 3);
  EXPECT_EQ(CountGpus(dev + "/missing"), 0);
  std::filesystem::remove_all(dev);
}

TEST(NodeInfoTest, FindsExecutablesOnThePath) {
  EXPECT_EQ(FindExecutable("sh", "/nonexistent::/bin:/usr/bin"), "/bin/sh");
  EXPECT_EQ(FindExecutable("no-such-program-here", "/bin:/usr/bin"), "");
  EXPECT_EQ(FindExecutable("sh", ""), "");
  EXPECT_EQ(FindExecutable("bin", "/usr"), "");  // a directory is not a program
}

TEST(NodeInfoTest, CpusAndEnvironment) {
  EXPECT_GE(CountCpus(), 1);
  EXPECT_FALSE(Hostname().empty());
  ASSERT_EQ(setenv("TRELLIS_NODE_INFO_TEST", "a=b", 1), 0);
  EXPECT_EQ(CurrentEnvironment().at("TRELLIS_NODE_INFO_TEST"), "a=b");
}

}  // namespace
}  // namespace trellis::worker
