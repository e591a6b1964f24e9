#include "worker/io/log_tail.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace trellis::worker {
namespace {

TEST(ReadFileTailTest, ReadsTheLastBytesOrAllOfAShortFile) {
  char tmpl[] = "/tmp/trellis-log-tail-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/log") << "first line\nsecond line\n";

  auto all = ReadFileTail(dir + "/log", kRankLogTailBytes);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*all, "first line\nsecond line\n");
  auto tail = ReadFileTail(dir + "/log", 7);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(*tail, "d line\n");

  auto missing = ReadFileTail(dir + "/none", 16);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir + "/none"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trellis::worker
