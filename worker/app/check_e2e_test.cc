// The trellis-worker binary's `check`, as `trellis doctor` runs it on a
// compute node: JSON lines on stdout only, exit 1 when a check failed.
#include <sstream>

#include "common/check_line.h"
#include "common/controller_address.h"
#include "worker/app/agent_e2e_fixture.h"

namespace trellis::worker {
namespace {

// Every line of `out` as a check line; a line that is not one fails the test.
std::vector<CheckLine> StdoutCheckLines(const std::string& out) {
  std::vector<CheckLine> lines;
  std::istringstream in(out);
  for (std::string text; std::getline(in, text);) {
    auto line = ParseCheckLineJson(text);
    EXPECT_TRUE(line.ok()) << "not a check line on stdout: " << text;
    if (line.ok()) lines.push_back(*line);
  }
  return lines;
}

CommandResult RunCheckBinary(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {TRELLIS_WORKER_BINARY, "check"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  CommandOptions o;
  o.timeout = 30s;
  auto r = RunCommand(argv, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : CommandResult{};
}

using V = CheckLine::Verdict;

TEST_F(AgentE2eTest, CheckFollowsTheControllerFileAndNamesWhatFailed) {
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  const std::string file = dir_ + "/controller.address";
  ASSERT_TRUE(WriteControllerAddress(file, ControllerAddress{address, "login2", 1}).ok());
  CommandResult r = RunCheckBinary({"--controller", "127.0.0.1:1", "--controller-file", file,
                                    "--path", run_dir_, "--path", "/nonexistent", "--sysfs-root",
                                    std::string(TRELLIS_SYSFS_FIXTURES) + "/report-median"});
  EXPECT_EQ(r.exit_code, kExitError) << r.err;
  std::vector<CheckLine> lines = StdoutCheckLines(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out;
  EXPECT_EQ(lines[0].name, "worker");
  EXPECT_EQ(lines[0].detail.rfind(std::string("trellis-worker ") + kVersion + " at /", 0), 0u)
      << lines[0].detail;
  EXPECT_EQ(lines[1].name, "path " + run_dir_);
  EXPECT_EQ(lines[1].verdict, V::kOk);
  EXPECT_EQ(lines[2].name, "path /nonexistent");
  EXPECT_EQ(lines[2].verdict, V::kFail);
  EXPECT_EQ(lines[2].detail,
            "/nonexistent is not visible from this node (No such file or directory); put it on "
            "a filesystem the compute nodes mount at the same path");
  EXPECT_EQ(lines[3].name, "controller");
  EXPECT_EQ(lines[3].verdict, V::kOk) << lines[3].detail;
  EXPECT_EQ(lines[3].detail.rfind("reached " + address + " (named by " + file + ") in ", 0), 0u)
      << lines[3].detail;
  EXPECT_EQ(lines[4].name, "numa");
  EXPECT_EQ(lines[4].verdict, V::kOk);
  EXPECT_EQ(lines[4].detail, "4 socket(s), 402.8 GiB free of 478.8 GiB");
  EXPECT_EQ(lines[5].name, "gpus");  // this machine's: any verdict
}

TEST_F(AgentE2eTest, CheckOfAnUnreachableControllerAndNoSysfsFails) {
  CommandResult r = RunCheckBinary({"--controller", "127.0.0.1:1", "--sysfs-root", dir_ + "/none"});
  EXPECT_EQ(r.exit_code, kExitError) << r.err;
  std::vector<CheckLine> lines = StdoutCheckLines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_EQ(lines[1].name, "controller");
  EXPECT_EQ(lines[1].verdict, V::kFail);
  EXPECT_EQ(lines[1].detail.rfind("cannot reach 127.0.0.1:1 from this node within 5 s; ", 0), 0u)
      << lines[1].detail;
  EXPECT_EQ(lines[2].name, "numa");
  EXPECT_EQ(lines[2].verdict, V::kFail);
  EXPECT_EQ(lines[2].detail.rfind("cannot read " + dir_ + "/none/devices/system/node: ", 0), 0u)
      << lines[2].detail;
}

TEST_F(AgentE2eTest, CheckWithBadFlagsExits2AndPrintsNothing) {
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--controller", "login1"},
        {"--controller", "127.0.0.1:1", "--path", "relative/dir"},
        {"--controller", "127.0.0.1:1", "--expect-gpus", "x"},
        {"--controller", "127.0.0.1:1", "--no-such-flag"}}) {
    CommandResult r = RunCheckBinary(flags);
    EXPECT_EQ(r.exit_code, kExitUsage) << r.err;
    EXPECT_EQ(r.out, "");
  }
  // No controller at all is no error: none serves yet, and its line says so.
  CommandResult none = RunCheckBinary({});
  EXPECT_NE(none.out.find(R"("check":"controller","detail":"no controller serves yet)"),
            std::string::npos)
      << none.out;
}

}  // namespace
}  // namespace trellis::worker
