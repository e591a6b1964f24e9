#include "cli/exit_status.h"

#include <gtest/gtest.h>

namespace trellis::cli {
namespace {

using grpc::StatusCode;

TEST(CliExitCodesTest, EveryStatusCodeHasItsExitCode) {
  struct Case {
    StatusCode code;
    bool connected;
    int exit_code;
  };
  for (const Case& c : std::vector<Case>{
           {StatusCode::OK, true, 0},
           {StatusCode::INVALID_ARGUMENT, true, 2},
           {StatusCode::FAILED_PRECONDITION, true, 2},
           {StatusCode::OUT_OF_RANGE, true, 2},
           {StatusCode::ALREADY_EXISTS, true, 2},
           {StatusCode::NOT_FOUND, true, 3},
           {StatusCode::UNAUTHENTICATED, true, 4},
           {StatusCode::PERMISSION_DENIED, true, 4},
           {StatusCode::UNAVAILABLE, false, 5},
           {StatusCode::UNAVAILABLE, true, 5},
           {StatusCode::DEADLINE_EXCEEDED, false, 5},  // never connected: unreachable
           {StatusCode::DEADLINE_EXCEEDED, true, 1},   // connected, slow: an error
           {StatusCode::INTERNAL, true, 1},
           {StatusCode::UNKNOWN, true, 1},
           {StatusCode::DATA_LOSS, true, 1},
           {StatusCode::CANCELLED, true, 1},
           {StatusCode::RESOURCE_EXHAUSTED, true, 6},
       }) {
    EXPECT_EQ(ExitCodeFor(c.code, c.connected), c.exit_code)
        << "code " << c.code << " connected " << c.connected;
  }
}

TEST(CliExitCodesTest, FinalStates) {
  EXPECT_EQ(ExitCodeForFinalState(v1::RUN_STATE_SUCCEEDED), 0);
  EXPECT_EQ(ExitCodeForFinalState(v1::RUN_STATE_FAILED), 1);
  EXPECT_EQ(ExitCodeForFinalState(v1::RUN_STATE_CANCELLED), 1);
}

TEST(CliExitCodesTest, SplitFieldErrors) {
  struct Case {
    std::string message;
    std::vector<std::string> lines;
  };
  for (const Case& c : std::vector<Case>{
           {"", {""}},
           {"job.name: must match [a-z0-9-]{1,63}", {"job.name: must match [a-z0-9-]{1,63}"}},
           {"slurm.nodez: unknown key; slurm.nodes: must be an integer in [1, 16384], got 0",
            {"slurm.nodez: unknown key", "slurm.nodes: must be an integer in [1, 16384], got 0"}},
           // A "; " inside one field's message does not split it.
           {"spec: is 2000000 bytes; the limit is 1048576",
            {"spec: is 2000000 bytes; the limit is 1048576"}},
           {"a: x; y; env.NCCL_MAX_CTAS: bad; slurm.extra_args[0]: not allowed",
            {"a: x; y", "env.NCCL_MAX_CTAS: bad", "slurm.extra_args[0]: not allowed"}},
       }) {
    EXPECT_EQ(SplitFieldErrors(c.message), c.lines) << c.message;
  }
}

TEST(CliExitCodesTest, DescribeError) {
  auto lines = DescribeError(StatusCode::UNAVAILABLE, "failed to connect to all addresses",
                             "127.0.0.1:1", false);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("127.0.0.1:1"), std::string::npos);
  EXPECT_NE(lines[0].find("TRELLIS_ADDR"), std::string::npos);
  EXPECT_NE(lines[0].find("--addr"), std::string::npos);

  EXPECT_EQ(DescribeError(StatusCode::INVALID_ARGUMENT, "a.b: x; c: y", "h:1", true),
            (std::vector<std::string>{"a.b: x", "c: y"}));
  EXPECT_EQ(DescribeError(StatusCode::NOT_FOUND, "no run 'x'", "h:1", true),
            std::vector<std::string>{"no run 'x'"});
  EXPECT_EQ(DescribeError(StatusCode::PERMISSION_DENIED, "run x belongs to bob", "h:1", true),
            std::vector<std::string>{"not allowed: run x belongs to bob"});
  EXPECT_EQ(DescribeError(StatusCode::RESOURCE_EXHAUSTED, "step: database or disk is full",
                          "h:1", true),
            (std::vector<std::string>{
                "step: database or disk is full",
                "nothing was stored; send it again once the controller has space"}));
  auto slow = DescribeError(StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded", "h:1", true);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_NE(slow[0].find("--timeout"), std::string::npos);
}

}  // namespace
}  // namespace trellis::cli
