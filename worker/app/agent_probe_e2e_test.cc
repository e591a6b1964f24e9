// The trellis-worker binary against an in-test AgentService: what it sends
// at registration (its metrics address, its memory probe) and its metrics.
#include <fstream>

#include "common/run_layout.h"
#include "worker/app/agent_e2e_fixture.h"

namespace trellis::worker {
namespace {

TEST_F(AgentE2eTest, MetricsAddressIsSentAndServesTheRanks) {
  WriteSpec("");
  const std::string hold = dir_ + "/hold";
  CommandResult r;
  // Default --metrics-listen: every interface, any free port.
  std::thread agent([&] { r = RunAgent({}, {{"HOLD_FILE", hold}}); });
  // The ranks hold until the file exists: their series are there meanwhile.
  const bool streamed = service_.WaitFor(
      [&] { return service_.steps.size() == 6; },
      20s);
  std::string addr, hostname;
  {
    std::lock_guard<std::mutex> l(service_.mu);
    if (!service_.registers.empty()) {
      addr = service_.registers[0].metrics_addr();
      hostname = service_.registers[0].hostname();
    }
  }
  testing::HttpResponse scrape;
  const size_t colon = addr.rfind(':');
  if (streamed && colon != std::string::npos)
    scrape = testing::HttpGet("127.0.0.1", std::stoi(addr.substr(colon + 1)), "/metrics");
  std::ofstream(hold).close();
  agent.join();
  ASSERT_TRUE(streamed);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  EXPECT_EQ(addr.substr(0, colon), hostname) << addr;
  ASSERT_EQ(scrape.error, "") << addr;
  EXPECT_NE(scrape.status_line.find(" 200"), std::string::npos) << scrape.status_line;
  for (const char* want :
       {"trellis_rank_steps_total{node=\"node2\",rank=\"2\",run=\"r1\"} 3\n",
        "trellis_rank_tokens_total{node=\"node2\",rank=\"3\",run=\"r1\"} 3009\n",
        "trellis_rank_info{gpu=\"none\",node=\"node2\",rank=\"3\",run=\"r1\",socket=\"",
        "trellis_build_info{version=\""})
    EXPECT_NE(scrape.body.find(want), std::string::npos) << want << " in\n" << scrape.body;

  // Off: no server, an empty address.
  r = RunAgent({"--metrics-listen", "off"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.registers.size(), 2u);
  EXPECT_EQ(service_.registers[1].metrics_addr(), "");
}

TEST_F(AgentE2eTest, MetricsBindFailureFailsTheLaunchWithTheAddress) {
  WriteSpec("");
  // A port some other program holds.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string taken = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  CommandResult r = RunAgent({"--metrics-listen", taken});
  ::close(fd);
  EXPECT_EQ(r.exit_code, kExitError) << r.err;
  std::lock_guard<std::mutex> l(service_.mu);
  // It still registers (empty address), so that a GO ends with the reason at the controller.
  ASSERT_EQ(service_.registers.size(), 1u);
  EXPECT_EQ(service_.registers[0].metrics_addr(), "");
  ASSERT_EQ(service_.exits.size(), 1u);
  EXPECT_NE(service_.exits[0].reason().find("cannot serve metrics on " + taken), std::string::npos)
      << service_.exits[0].reason();
  EXPECT_EQ(service_.reports.size(), 0u);  // no rank started
  // Its final report is also in the launch's directory (which no rank made),
  // for a controller that restarts before it heard the report.
  std::ifstream file(FinalReportPath(run_dir_, 1, 2, "node2"));
  const std::string json{std::istreambuf_iterator<char>(file), {}};
  EXPECT_NE(json.find("cannot serve metrics on " + taken), std::string::npos) << json;
}

TEST_F(AgentE2eTest, RegisterCarriesTheMemoryProbe) {
  WriteSpec("");
  // %n: the node name, as the local cluster's env file writes it.
  CommandResult r = RunAgent(
      {}, {{"TRELLIS_SYSFS_ROOT", std::string(TRELLIS_SYSFS_FIXTURES) + "/report-worst%n"}});
  // "%n" -> node2: ".../report-worstnode2" does not exist, so this probe fails; the next
  // run names the tree with --sysfs-root, which wins over the environment.
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunAgent({"--sysfs-root", std::string(TRELLIS_SYSFS_FIXTURES) + "/report-worst"},
               {{"TRELLIS_SYSFS_ROOT", "/nonexistent/%n"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("socket 2 (CPUs 144-215): 119.7 GiB total, 72.7 GiB free, 39.9 GiB "
                       "unattributed"),
            std::string::npos)
      << r.err;

  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.registers.size(), 2u);
  const v1::NodeProbe& failed = service_.registers[0].probe();
  EXPECT_NE(failed.error().find("report-worstnode2/devices/system/node does not exist"),
            std::string::npos)
      << failed.error();
  const v1::NodeProbe& probe = service_.registers[1].probe();
  EXPECT_EQ(probe.error(), "");
  EXPECT_GT(probe.probed_unix_ms(), 0);
  ASSERT_EQ(probe.sockets_size(), 4);
  const v1::SocketProbe& s = probe.sockets(2);
  EXPECT_EQ(s.numa_node(), 2);
  EXPECT_EQ(s.cpulist(), "144-215");
  EXPECT_EQ(s.total_bytes(), int64_t{125514547} * 1024);
  EXPECT_EQ(s.free_bytes(), int64_t{76231475} * 1024);
  EXPECT_EQ(s.unattributed_bytes(), int64_t{41838182} * 1024);
  EXPECT_EQ(s.file_pages_bytes() + s.anon_pages_bytes() + s.slab_bytes() + s.kernel_stack_bytes() +
                s.page_tables_bytes() + s.hugepages_bytes() + s.unattributed_bytes(),
            s.total_bytes() - s.free_bytes());
  EXPECT_FALSE(s.has_touch_obtainable_bytes());
  ASSERT_EQ(probe.device_nodes_size(), 4);
  EXPECT_EQ(probe.device_nodes(3).numa_node(), 28);
  EXPECT_EQ(probe.device_nodes(3).total_bytes(), int64_t{100663296} * 1024);
}

TEST_F(AgentE2eTest, TouchProbeFromTheSpecReportsObtainableBytes) {
  std::ofstream(run_dir_ + "/spec.toml")
      << "[job]\nname = 't'\ncommand = ['true']\n[slurm]\nnodes = 2\nranks_per_node = 2\n"
      << "[gate]\ntouch_probe = true\n";
  if (!std::filesystem::exists("/sys/devices/system/node/node0"))
    GTEST_SKIP() << "no NUMA nodes in /sys";
  CommandResult r = RunAgent(
      {"--sysfs-root", "/sys", "--touch-probe-gib", "0.0625", "--touch-probe-seconds", "10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.registers.size(), 1u);
  const v1::NodeProbe& probe = service_.registers[0].probe();
  EXPECT_EQ(probe.error(), "");
  ASSERT_GE(probe.sockets_size(), 1);
  EXPECT_EQ(probe.sockets(0).touch_obtainable_bytes(), 64 << 20);
  EXPECT_NE(r.err.find("touch probe obtained 0.1 of 0.1 GiB"), std::string::npos) << r.err;
}

TEST_F(AgentE2eTest, TouchProbeOnASocketThisMachineLacksFailsTheProbeNotTheWorker) {
  std::ofstream(run_dir_ + "/spec.toml")
      << "[job]\nname = 't'\ncommand = ['true']\n[slurm]\nnodes = 2\nranks_per_node = 2\n"
      << "[gate]\ntouch_probe = true\n";
  // The fixture's sockets 1-3 are not on this machine (or libnuma is unavailable).
  CommandResult r = RunAgent({"--sysfs-root", std::string(TRELLIS_SYSFS_FIXTURES) + "/gh200-node",
                              "--touch-probe-gib", "0.0625", "--touch-probe-seconds", "10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.registers.size(), 1u);
  const v1::NodeProbe& probe = service_.registers[0].probe();
  EXPECT_NE(probe.error().find("touch probe"), std::string::npos) << probe.error();
  EXPECT_EQ(probe.sockets_size(), 4);
}

}  // namespace
}  // namespace trellis::worker
