// The ranks' metrics as a node's /metrics serves them (common/metrics_server.h):
// what Prometheus reads, linted by promtool.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/metrics_server.h"
#include "worker/metrics/rank_metrics.h"
#include "worker/testing/http_get.h"

namespace trellis::worker {
namespace {

using testing::HttpGet;

constexpr const char* kPromtool = "/usr/bin/promtool";

struct Verdict {
  int exit_code = -1;
  std::string output;
};

// `promtool check metrics` with `text` on its standard input.
Verdict CheckMetrics(const std::string& text) {
  char out_path[] = "/tmp/trellis-promtool-XXXXXX";
  int fd = ::mkstemp(out_path);
  if (fd < 0) return {};
  ::close(fd);
  const std::string command = std::string(kPromtool) + " check metrics >" + out_path + " 2>&1";
  Verdict v;
  if (FILE* pipe = ::popen(command.c_str(), "w")) {
    std::fwrite(text.data(), 1, text.size(), pipe);
    int status = ::pclose(pipe);
    v.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::ifstream in(out_path);
  std::stringstream s;
  s << in.rdbuf();
  v.output = s.str();
  std::filesystem::remove(out_path);
  return v;
}

StepRecord FullRecord(int64_t step) {
  StepRecord r;
  r.step = step;
  r.loss = 2.5;
  r.tokens = 4096;
  r.step_seconds = 0.75;
  r.grad_norm = 0.9;
  r.fwd_seconds = 0.25;
  r.bwd_seconds = 0.375;
  r.optim_seconds = 0.0625;
  r.comm_seconds = 0.125;
  r.exposed_comm_seconds = 0.03125;
  r.alloc_retries = step;
  r.mem_allocated_peak_bytes = int64_t{70} << 30;
  r.mem_reserved_peak_bytes = int64_t{90} << 30;
  r.host_arena_bytes = int64_t{16} << 30;
  r.nccl_max_ctas = 16;
  r.checkpoint_step = 0;
  r.checkpoint_seconds = 0.5;
  return r;
}

TEST(RankMetricsHttpTest, ServesTheRanksAndPassesPromtool) {
  auto registry = std::make_shared<prometheus::Registry>();
  AddBuildInfo(*registry, "0.0.0-test");
  RankMetrics metrics(*registry, "run-1", "node2");
  auto server = MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Serve(registry);
  const int port = (*server)->port();
  ASSERT_GT(port, 0);

  metrics.OnStart(2, {"0", "0"});
  metrics.OnStart(3, {"none", "none"});
  const auto now = std::chrono::system_clock::now();
  for (int64_t step = 1; step <= 3; ++step) metrics.OnStep(2, FullRecord(step), now);
  StepRecord plain;  // a generic command's record: the required fields only
  plain.step = 7;
  plain.tokens = 10;
  plain.step_seconds = 1;
  metrics.OnStep(3, plain, now);

  testing::HttpResponse r = HttpGet("127.0.0.1", port, "/metrics");
  ASSERT_EQ(r.error, "");
  EXPECT_NE(r.status_line.find(" 200"), std::string::npos) << r.status_line;
  for (const char* want : {
           "trellis_rank_steps_total{node=\"node2\",rank=\"2\",run=\"run-1\"} "
           "3\n",
           "trellis_rank_alloc_retries_total{node=\"node2\",rank=\"2\",run="
           "\"run-1\"} 3\n",
           "trellis_rank_info{gpu=\"0\",node=\"node2\",rank=\"2\",run=\"run-"
           "1\",socket=\"0\"} 1\n",
           "trellis_rank_last_step{node=\"node2\",rank=\"3\",run=\"run-1\"} "
           "7\n",
           "trellis_build_info{version=\"0.0.0-test\"} 1\n",
           "# TYPE trellis_rank_step_seconds_total counter\n",
           "# TYPE trellis_rank_loss gauge\n",
       })
    EXPECT_NE(r.body.find(want), std::string::npos) << want << " in\n" << r.body;

  if (::access(kPromtool, X_OK) != 0)
    GTEST_SKIP() << kPromtool << " is missing (Debian package prometheus): not linted";
  Verdict v = CheckMetrics(r.body);
  EXPECT_EQ(v.exit_code, 0) << v.output;
  EXPECT_EQ(v.output, "") << r.body;
}

}  // namespace
}  // namespace trellis::worker
