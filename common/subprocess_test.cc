#include "common/subprocess.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

TEST(SubprocessTest, CapturesOutputAndExitCodeWithoutAShell) {
  auto r = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  // Arguments are passed as they are: no word splitting, no globbing.
  auto e = RunCommand({"echo", "a  *  $HOME"});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->out, "a  *  $HOME\n");
}

TEST(SubprocessTest, KillsOnTimeout) {
  CommandOptions o;
  o.timeout = std::chrono::milliseconds(200);
  auto r = RunCommand({"sleep", "30"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, 128 + 9);
}

TEST(SubprocessTest, MissingProgramIsAnError) {
  auto r = RunCommand({"/nonexistent/prog"});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/prog"), std::string::npos);
}

TEST(SubprocessTest, ExtraEnvironment) {
  CommandOptions o;
  o.extra_env["TRELLIS_TEST_VAR"] = "v1";
  auto r = RunCommand({"/bin/sh", "-c", "echo $TRELLIS_TEST_VAR"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "v1\n");
}

}  // namespace
}  // namespace trellis
