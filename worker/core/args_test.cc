#include "worker/core/args.h"

#include <gtest/gtest.h>

namespace trellis::worker {
namespace {

AgentArgs Good() {
  AgentArgs a;
  a.id = {"ctl.example:7070", "run-1", 1, 1, "node1", "/out/secret", ""};
  a.run_dir = "/out/run-1";
  return a;
}

TEST(ArgsTest, GoodArgsPass) {
  EXPECT_TRUE(ValidateAgentArgs(Good()).ok());
  NextLaunchArgs n;
  n.id = Good().id;
  n.step_exit_code = 3;
  EXPECT_TRUE(ValidateNextLaunchArgs(n).ok());
}

TEST(ArgsTest, ControllerAddress) {
  EXPECT_TRUE(IsValidControllerAddress("localhost:1"));
  EXPECT_TRUE(IsValidControllerAddress("10.0.0.1:65535"));
  EXPECT_TRUE(IsValidControllerAddress("[::1]:7070"));
  EXPECT_FALSE(IsValidControllerAddress("localhost"));
  EXPECT_FALSE(IsValidControllerAddress(":7070"));
  EXPECT_FALSE(IsValidControllerAddress("host:0"));
  EXPECT_FALSE(IsValidControllerAddress("host:65536"));
  EXPECT_FALSE(IsValidControllerAddress("host:x"));
  EXPECT_FALSE(IsValidControllerAddress("ho st:80"));
  EXPECT_FALSE(IsValidControllerAddress("[]:80"));
  // The same check as the controller's flags (common/host_port.h): brackets hold an IPv6
  // address, and the whole is at most 255 characters.
  EXPECT_FALSE(IsValidControllerAddress("[not an address]:80"));
  EXPECT_FALSE(IsValidControllerAddress(std::string(250, 'a') + ".host:7070"));
}

TEST(ArgsTest, MetricsListenAddress) {
  EXPECT_TRUE(IsValidListenAddress("0.0.0.0:0"));
  EXPECT_TRUE(IsValidListenAddress("127.0.0.1:9400"));
  EXPECT_TRUE(IsValidListenAddress("[::]:0"));
  EXPECT_FALSE(IsValidListenAddress("9400"));
  EXPECT_FALSE(IsValidListenAddress("host:65536"));
  EXPECT_FALSE(IsValidListenAddress("host:-1"));
  EXPECT_FALSE(IsValidListenAddress("0.0.0.0:0,127.0.0.1:0"));  // one address only

  AgentArgs a = Good();
  EXPECT_EQ(a.metrics_listen, "0.0.0.0:0");
  a.metrics_listen = "off";
  EXPECT_TRUE(ValidateAgentArgs(a).ok());
}

TEST(ArgsTest, AdvertisedMetricsAddress) {
  // Every interface: the host name, which the controller's host can resolve.
  EXPECT_EQ(AdvertisedMetricsAddress("0.0.0.0:0", "node7", 41234), "node7:41234");
  EXPECT_EQ(AdvertisedMetricsAddress("[::]:9400", "node7", 9400), "node7:9400");
  // One interface: that one.
  EXPECT_EQ(AdvertisedMetricsAddress("10.1.2.3:0", "node7", 41234), "10.1.2.3:41234");
  EXPECT_EQ(AdvertisedMetricsAddress("[fd00::7]:9400", "node7", 9400), "[fd00::7]:9400");
}

struct BadArgs {
  const char* name;
  void (*mutate)(AgentArgs*);
  const char* message;
};

void PrintTo(const BadArgs& c, std::ostream* os) { *os << c.name; }

class AgentArgsBadTest : public ::testing::TestWithParam<BadArgs> {};

TEST_P(AgentArgsBadTest, NamesTheFlag) {
  AgentArgs a = Good();
  GetParam().mutate(&a);
  absl::Status st = ValidateAgentArgs(a);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(GetParam().message), std::string::npos) << st;
}

INSTANTIATE_TEST_SUITE_P(
    Table, AgentArgsBadTest,
    ::testing::Values(
        BadArgs{"Controller", [](AgentArgs* a) { a->id.controller = "nope"; }, "--controller"},
        BadArgs{"RunEmpty", [](AgentArgs* a) { a->id.run_id = ""; }, "--run must be"},
        BadArgs{"RunSlash", [](AgentArgs* a) { a->id.run_id = "../x"; }, "--run must be"},
        BadArgs{"Attempt", [](AgentArgs* a) { a->id.attempt = 0; }, "--attempt must be >= 1"},
        BadArgs{"Launch", [](AgentArgs* a) { a->id.launch = -1; }, "--launch must be >= 1"},
        BadArgs{"Node", [](AgentArgs* a) { a->id.node = "a b"; }, "--node must be"},
        BadArgs{"Secret", [](AgentArgs* a) { a->id.secret_file = ""; }, "--secret-file"},
        BadArgs{"RunDir", [](AgentArgs* a) { a->run_dir = ""; }, "--run-dir"},
        BadArgs{"Heartbeat", [](AgentArgs* a) { a->heartbeat_interval = Seconds(0); },
                "--heartbeat-interval must be a positive"},
        BadArgs{"Grace", [](AgentArgs* a) { a->kill_grace = Seconds(-1); }, "--kill-grace"},
        BadArgs{"GateWait", [](AgentArgs* a) { a->gate_wait = Seconds(0); }, "--gate-wait"},
        BadArgs{"Queue", [](AgentArgs* a) { a->max_queued_reports = 1; }, "--max-queued-reports"},
        BadArgs{"TouchGibZero", [](AgentArgs* a) { a->touch_probe_gib = 0; }, "--touch-probe-gib"},
        BadArgs{"TouchGibHuge", [](AgentArgs* a) { a->touch_probe_gib = 1e6; },
                "--touch-probe-gib must be in (0, 1024]"},
        BadArgs{"TouchSeconds", [](AgentArgs* a) { a->touch_probe_budget = Seconds(0); },
                "--touch-probe-seconds"},
        BadArgs{"TouchSecondsLong", [](AgentArgs* a) { a->touch_probe_budget = Seconds(601); },
                "--touch-probe-seconds must be in (0, 600]"},
        BadArgs{"ControllerFile", [](AgentArgs* a) { a->id.controller_file = "state/x"; },
                "--controller-file must be an absolute path, got 'state/x'"},
        BadArgs{"MetricsListen", [](AgentArgs* a) { a->metrics_listen = "on"; },
                "--metrics-listen must be HOST:PORT with a port in [0, 65535] (0: any free "
                "port) or 'off', got 'on'"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ArgsTest, NextLaunchStepExitCodeRange) {
  NextLaunchArgs n;
  n.id = Good().id;
  n.step_exit_code = 256;
  EXPECT_FALSE(ValidateNextLaunchArgs(n).ok());
  n.step_exit_code = 0;
  n.timeout = Seconds(0);
  EXPECT_FALSE(ValidateNextLaunchArgs(n).ok());
}

// A requeued job's batch script asks before any launch: --launch 0 then, and only then.
TEST(ArgsTest, NextLaunchAfterARequeue) {
  NextLaunchArgs n;
  n.id = Good().id;
  n.id.launch = 0;
  n.requeue_count = 1;
  n.allocation_nodelist = "node[1-4],gpu7";
  EXPECT_TRUE(ValidateNextLaunchArgs(n).ok());
  auto message = [](const NextLaunchArgs& a) {
    return std::string(ValidateNextLaunchArgs(a).message());
  };
  NextLaunchArgs bad = n;
  bad.id.launch = 1;
  EXPECT_EQ(message(bad), "--launch must be 0 with --requeued, got 1");
  bad = n;
  bad.requeue_count = 1001;
  EXPECT_EQ(message(bad), "--requeued must be in [0, 1000], got 1001");
  bad = n;
  bad.terminated_by_slurm = true;
  EXPECT_EQ(message(bad), "--terminated-by-slurm and --requeued exclude each other");
  bad = n;
  bad.allocation_nodelist = "node1;reboot";
  EXPECT_NE(message(bad).find("--allocation must be a Slurm hostlist"), std::string::npos);
  bad = n;
  bad.requeue_count = 0;
  EXPECT_EQ(message(bad), "--allocation is only for --requeued");
  bad.allocation_nodelist.clear();
  EXPECT_EQ(message(bad), "--launch must be >= 1, got 0");
}

TEST(ArgsTest, Standby) {
  StandbyArgs good;
  good.controller = "login1:7000";
  good.run_id = "hello-1";
  good.pool = 2;
  good.node = "node9";
  good.secret_file = "/srv/out/hello-1/pool-2.secret";
  good.run_dir = "/srv/out/hello-1";
  EXPECT_TRUE(ValidateStandbyArgs(good).ok());
  auto message = [](const StandbyArgs& a) {
    return std::string(ValidateStandbyArgs(a).message());
  };
  StandbyArgs bad = good;
  bad.pool = 0;
  EXPECT_EQ(message(bad), "--pool must be in [1, 1000000], got 0");
  bad = good;
  bad.node = "-rf";
  EXPECT_EQ(message(bad), "--node must be 1-128 characters of [A-Za-z0-9._-], got '-rf'");
  bad = good;
  bad.controller = "login1";
  EXPECT_EQ(message(bad), "--controller must be HOST:PORT with a port in [1, 65535], got 'login1'");
  bad = good;
  bad.touch_probe_gib = 0;
  EXPECT_EQ(message(bad), "--touch-probe-gib must be in (0, 1024], got 0");
  bad = good;
  bad.call_timeout = Seconds(0);
  EXPECT_EQ(message(bad), "--call-timeout must be a positive number of seconds, got 0");
  bad = good;
  bad.controller_file = "controller.address";
  EXPECT_EQ(message(bad), "--controller-file must be an absolute path, got 'controller.address'");
  good.controller_file = "/srv/state/controller.address";
  EXPECT_TRUE(ValidateStandbyArgs(good).ok());
}

// Optional everywhere: empty is today's behaviour, --controller alone.
TEST(ArgsTest, ControllerFileIsEmptyOrAbsolute) {
  EXPECT_TRUE(ValidateControllerFile("").ok());
  EXPECT_TRUE(ValidateControllerFile("/srv/state/controller.address").ok());
  EXPECT_FALSE(ValidateControllerFile("./controller.address").ok());
  EXPECT_FALSE(ValidateControllerFile(" /srv/state/controller.address").ok());
  NextLaunchArgs n;
  n.id = Good().id;
  n.id.controller_file = "/srv/state/controller.address";
  EXPECT_TRUE(ValidateNextLaunchArgs(n).ok());
  n.id.controller_file = "relative";
  EXPECT_EQ(ValidateNextLaunchArgs(n).message(),
            "--controller-file must be an absolute path, got 'relative'");
}

TEST(ArgsTest, Check) {
  CheckArgs good;
  good.controller = "login1:7000";
  EXPECT_TRUE(ValidateCheckArgs(good).ok());
  good.paths = {"/srv/out", "/srv/data/corpus.bin"};
  good.controller_file = "/srv/state/controller.address";
  good.expect_gpus = 8;
  EXPECT_TRUE(ValidateCheckArgs(good).ok());
  auto message = [](const CheckArgs& a) { return std::string(ValidateCheckArgs(a).message()); };
  CheckArgs bad = good;
  bad.controller = "login1";
  EXPECT_EQ(message(bad), "--controller must be HOST:PORT with a port in [1, 65535], got 'login1'");
  bad = good;
  bad.controller_file = "state/controller.address";
  EXPECT_EQ(message(bad),
            "--controller-file must be an absolute path, got 'state/controller.address'");
  CheckArgs none = good;  // no controller serves yet: its line is skipped
  none.controller.clear();
  none.controller_file.clear();
  EXPECT_TRUE(ValidateCheckArgs(none).ok());
  bad = good;
  bad.paths.push_back("out");
  EXPECT_EQ(message(bad), "--path must be an absolute path, got 'out'");
  bad = good;
  bad.paths.push_back("");
  EXPECT_EQ(message(bad), "--path must be an absolute path, got ''");
  bad = good;
  bad.expect_gpus = -1;
  EXPECT_EQ(message(bad), "--expect-gpus must be in [0, 1024], got -1");
}

TEST(ArgsTest, TrimSecret) {
  EXPECT_EQ(TrimSecret("  s3cret\n"), "s3cret");
  EXPECT_EQ(TrimSecret("\n\t"), "");
}

}  // namespace
}  // namespace trellis::worker
