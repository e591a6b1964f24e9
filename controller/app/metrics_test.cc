// The controller's metrics driven through their hooks and read back as
// Prometheus text; the service-discovery file; /metrics served over HTTP and
// checked by promtool; an address that cannot be served.

#include "controller/app/metrics.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/metrics_server.h"
#include "common/version.h"
#include "controller/app/scrape_targets.h"
#include "prometheus/text_serializer.h"

namespace trellis::controller {
namespace {

namespace fs = std::filesystem;

std::string Text(const Metrics& m) {
  return prometheus::TextSerializer().Serialize(m.registry()->Collect());
}

// The value of one series (`name{labels}` exactly as serialized); NaN when absent.
double Value(const std::string& text, const std::string& series) {
  std::string key = "\n" + series + " ";
  size_t at = text.find(key);
  if (at == std::string::npos) return std::nan("");
  return std::strtod(text.c_str() + at + key.size(), nullptr);
}

bool Has(const std::string& text, const std::string& series) {
  return !std::isnan(Value(text, series));
}

NodeProbe Probe(double free0, double free1) {
  NodeProbe p;
  for (double free : {free0, free1}) {
    SocketProbe s;
    s.numa_node = static_cast<int>(p.sockets.size());
    s.free_bytes = static_cast<int64_t>(free);
    s.unattributed_bytes = 1000 * (s.numa_node + 1);
    p.sockets.push_back(s);
  }
  return p;
}

TEST(MetricsTest, RunsAttemptsLaunchesRestartsAndNodes) {
  Metrics m;
  std::string t = Text(m);
  // Fixed label sets are there from the start, at 0.
  EXPECT_EQ(Value(t, "trellis_runs{state=\"CANCELLED\"}"), 0);
  EXPECT_EQ(Value(t, "trellis_restarts_total{class=\"hang\"}"), 0);
  EXPECT_EQ(Value(t, "trellis_gate_decisions_total{decision=\"ABORT\"}"), 0);
  EXPECT_EQ(Value(t, "trellis_rpc_duration_seconds_count{method=\"Register\"}"), 0);
  EXPECT_EQ(Value(t, "trellis_slurm_command_duration_seconds_count{command=\"sacct\"}"), 0);
  EXPECT_EQ(Value(t, "trellis_build_info{version=\"" + std::string(kVersion) + "\"}"), 1);
  EXPECT_FALSE(Has(t, "trellis_restarts_total{class=\"succeeded\"}"));

  m.SetRuns({{RunState::kQueued, 2}, {RunState::kSucceeded, 1}});
  m.RunQueued();
  m.Transition("a-1", RunState::kQueued, RunState::kSubmitted);
  m.Transition("a-1", RunState::kSubmitted, RunState::kGating);
  m.GateDecided("a-1", /*go=*/false, {});
  m.Transition("a-1", RunState::kGating, RunState::kQueued);
  m.Transition("a-1", RunState::kQueued, RunState::kSubmitted);
  m.Transition("a-1", RunState::kSubmitted, RunState::kGating);
  m.GateDecided("a-1", /*go=*/true, {});
  m.LaunchStarted("a-1");
  m.Transition("a-1", RunState::kGating, RunState::kRunning);
  t = Text(m);
  EXPECT_EQ(Value(t, "trellis_run_restarts_total{run=\"a-1\"}"), 0) << "exists from the launch";
  EXPECT_EQ(Value(t, "trellis_straggler_events_total{run=\"a-1\"}"), 0);
  m.Restart("a-1", FailureClass::kNodeLost, /*relaunch=*/true);
  m.Restart("a-1", FailureClass::kNodeLost, /*relaunch=*/false);
  m.Restart("a-1", std::nullopt, /*relaunch=*/false);
  m.NodeStruck("node3");
  m.NodeStruck("node3");
  m.SetQuarantinedNodes(1);
  m.ObserveRpc(RpcMethod::kSubmitRun, std::chrono::milliseconds(3));
  m.ObserveSlurm(SlurmCommand::kSbatch, std::chrono::milliseconds(40));
  m.ObserveStoreWrite(std::chrono::microseconds(700));

  t = Text(m);
  EXPECT_EQ(Value(t, "trellis_runs{state=\"QUEUED\"}"), 2);
  EXPECT_EQ(Value(t, "trellis_runs{state=\"RUNNING\"}"), 1);
  EXPECT_EQ(Value(t, "trellis_runs{state=\"SUBMITTED\"}"), 0);
  EXPECT_EQ(Value(t, "trellis_runs{state=\"SUCCEEDED\"}"), 1);
  EXPECT_EQ(Value(t, "trellis_attempts_total"), 2);
  EXPECT_EQ(Value(t, "trellis_launches_total"), 1);
  EXPECT_EQ(Value(t, "trellis_gate_decisions_total{decision=\"GO\"}"), 1);
  EXPECT_EQ(Value(t, "trellis_gate_decisions_total{decision=\"ABORT\"}"), 1);
  EXPECT_EQ(Value(t, "trellis_restarts_total{class=\"node_lost\"}"), 2);
  EXPECT_EQ(Value(t, "trellis_restarts_total{class=\"unknown\"}"), 1);
  EXPECT_EQ(Value(t, "trellis_relaunches_total"), 1);
  EXPECT_EQ(Value(t, "trellis_run_restarts_total{run=\"a-1\"}"), 3);
  EXPECT_EQ(Value(t, "trellis_node_strikes_total{node=\"node3\"}"), 2);
  EXPECT_EQ(Value(t, "trellis_quarantined_nodes"), 1);
  EXPECT_EQ(Value(t, "trellis_rpc_duration_seconds_count{method=\"SubmitRun\"}"), 1);
  EXPECT_EQ(Value(t, "trellis_rpc_duration_seconds_bucket{method=\"SubmitRun\",le=\"0.0025\"}"), 0);
  EXPECT_EQ(Value(t, "trellis_rpc_duration_seconds_bucket{method=\"SubmitRun\",le=\"0.005\"}"), 1);
  EXPECT_EQ(Value(t, "trellis_slurm_command_duration_seconds_count{command=\"sbatch\"}"), 1);
  EXPECT_NEAR(Value(t, "trellis_slurm_command_duration_seconds_sum{command=\"sbatch\"}"), 0.04,
              1e-9);
  EXPECT_EQ(Value(t, "trellis_store_write_duration_seconds_count"), 1);
}

TEST(MetricsTest, ARunsSeriesAreReplacedPerGateAndGoWhenItEnds) {
  Metrics m;
  const std::string free = "trellis_gate_socket_free_bytes";
  const std::string unattributed = "trellis_gate_socket_unattributed_bytes";
  m.GateDecided("a-1", true, {{"node1", Probe(100e9, 101e9)}, {"node2", Probe(72e9, 99e9)}});
  m.GateDecided("b-2", true, {{"node4", Probe(90e9, 91e9)}});
  std::string t = Text(m);
  EXPECT_EQ(Value(t, free + "{node=\"node2\",run=\"a-1\",socket=\"0\"}"), 72e9);
  EXPECT_EQ(Value(t, unattributed + "{node=\"node2\",run=\"a-1\",socket=\"1\"}"), 2000);
  // The next gate of a-1 (a relaunch on node1 and node3) replaces its figures.
  m.GateDecided("a-1", true, {{"node1", Probe(98e9, 97e9)}, {"node3", Probe(95e9, 96e9)}});
  t = Text(m);
  EXPECT_FALSE(Has(t, free + "{node=\"node2\",run=\"a-1\",socket=\"0\"}"));
  EXPECT_FALSE(Has(t, unattributed + "{node=\"node2\",run=\"a-1\",socket=\"1\"}"));
  EXPECT_EQ(Value(t, free + "{node=\"node1\",run=\"a-1\",socket=\"1\"}"), 97e9);
  EXPECT_EQ(Value(t, free + "{node=\"node3\",run=\"a-1\",socket=\"0\"}"), 95e9);

  m.Straggler("a-1");
  m.Straggler("a-1");
  m.StepComplete("a-1", StepSpread{41, 2, 1.5, 0.5}, 400);
  m.StepComplete("a-1", StepSpread{42, 3, 2.0, 0.5}, 400);
  m.StepComplete("b-2", StepSpread{7, 0, 1.0, 1.0}, 100);
  t = Text(m);
  EXPECT_EQ(Value(t, "trellis_straggler_events_total{run=\"a-1\"}"), 2);
  EXPECT_EQ(Value(t, "trellis_run_last_step{run=\"a-1\"}"), 42);
  EXPECT_EQ(Value(t, "trellis_run_slowest_rank{run=\"a-1\"}"), 3);
  EXPECT_EQ(Value(t, "trellis_run_slowest_step_seconds{run=\"a-1\"}"), 2.0);
  EXPECT_EQ(Value(t, "trellis_run_median_step_seconds{run=\"a-1\"}"), 0.5);
  EXPECT_EQ(Value(t, "trellis_run_tokens_per_second{run=\"a-1\"}"), 200);

  m.Transition("a-1", RunState::kRunning, RunState::kSucceeded);
  t = Text(m);
  for (const std::string& series : {free + "{node=\"node1\",run=\"a-1\",socket=\"1\"}",
                                    unattributed + "{node=\"node3\",run=\"a-1\",socket=\"0\"}",
                                    std::string("trellis_straggler_events_total{run=\"a-1\"}"),
                                    std::string("trellis_run_last_step{run=\"a-1\"}"),
                                    std::string("trellis_run_slowest_rank{run=\"a-1\"}"),
                                    std::string("trellis_run_slowest_step_seconds{run=\"a-1\"}"),
                                    std::string("trellis_run_median_step_seconds{run=\"a-1\"}"),
                                    std::string("trellis_run_tokens_per_second{run=\"a-1\"}")})
    EXPECT_FALSE(Has(t, series)) << series;
  EXPECT_EQ(t.find("run=\"a-1\""), std::string::npos) << t;
  // The other run keeps its own.
  EXPECT_EQ(Value(t, free + "{node=\"node4\",run=\"b-2\",socket=\"0\"}"), 90e9);
  EXPECT_EQ(Value(t, "trellis_run_last_step{run=\"b-2\"}"), 7);
}

TEST(ScrapeTargetsTest, TheFileListsTheRunningLaunchesWorkers) {
  fs::path dir = fs::temp_directory_path() / ("scrape_targets_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string path = (dir / "targets.json").string();
  auto read = [&] {
    std::ifstream in(path);
    return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  };
  ScrapeTargets targets(path);
  ASSERT_TRUE(targets.Flush().ok());
  EXPECT_EQ(read(), nlohmann::json::array()) << "written empty at start";

  targets.Add({"a-1", 1, 1}, {{"node1", "h1:9400"}, {"node2", "h2:9400"}});
  targets.Add({"b-2", 1, 1}, {{"node4", "h4:9400"}});
  ASSERT_TRUE(targets.Flush().ok());
  EXPECT_EQ(read(), nlohmann::json::parse(R"([
    {"targets": ["h1:9400"], "labels": {"run": "a-1", "node": "node1"}},
    {"targets": ["h2:9400"], "labels": {"run": "a-1", "node": "node2"}},
    {"targets": ["h4:9400"], "labels": {"run": "b-2", "node": "node4"}}])"));
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  targets.Remove({"a-1", 1, 1});
  targets.Add({"a-1", 1, 2}, {{"node3", "h3:9400"}});
  targets.RemoveRun("b-2");
  ASSERT_TRUE(targets.Flush().ok());
  EXPECT_EQ(read(), nlohmann::json::parse(R"([
    {"targets": ["h3:9400"], "labels": {"run": "a-1", "node": "node3"}}])"));
  targets.RemoveRun("a-1");
  ASSERT_TRUE(targets.Flush().ok());
  EXPECT_EQ(read(), nlohmann::json::array());
  fs::remove_all(dir);
}

// --- served ---

// GET over a plain TCP socket; the whole response, headers included.
std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) response.append(buf, n);
    }
  }
  close(fd);
  return response;
}

struct Piped {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `argv` with `input` on its stdin.
Piped PipeThrough(const std::vector<std::string>& argv, const std::string& input) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(out[1], 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  // The input is small: it fits the pipe while the program has not read it yet.
  size_t sent = 0;
  while (sent < input.size()) {
    ssize_t n = write(in[1], input.data() + sent, input.size() - sent);
    if (n <= 0) break;
    sent += n;
  }
  close(in[1]);
  Piped r;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) r.output.append(buf, n);
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

TEST(ControllerMetricsServerTest, ServesTextThatPromtoolAccepts) {
  Metrics m;
  // Every family with series, the per-run and per-node ones included.
  m.SetRuns({{RunState::kRunning, 1}});
  m.GateDecided("a-1", true, {{"node1", Probe(100e9, 101e9)}});
  m.StepComplete("a-1", StepSpread{3, 1, 1.5, 1.0}, 400);
  m.Straggler("a-1");
  m.NodeStruck("node2");
  m.ObserveRpc(RpcMethod::kRegister, std::chrono::seconds(2));
  auto server = trellis::MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  (*server)->Serve(m.registry());

  std::string response = HttpGet((*server)->port(), "/metrics");
  ASSERT_EQ(response.rfind("HTTP/1.", 0), 0u) << response;
  EXPECT_NE(response.find(" 200 "), std::string::npos) << response.substr(0, 200);
  size_t blank = response.find("\r\n\r\n");
  ASSERT_NE(blank, std::string::npos);
  std::string body = response.substr(blank + 4);
  EXPECT_EQ(Value(body, "trellis_run_last_step{run=\"a-1\"}"), 3) << body;
  EXPECT_EQ(Value(body, "trellis_node_strikes_total{node=\"node2\"}"), 1);

  if (access("/usr/bin/promtool", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/promtool";
  Piped check = PipeThrough({"/usr/bin/promtool", "check", "metrics"}, body);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_EQ(check.output, "") << "promtool's complaints";
}

}  // namespace
}  // namespace trellis::controller
