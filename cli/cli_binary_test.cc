// Runs the built `trellis` binary: exit codes and messages of the contract
// that need no controller.

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace trellis {
namespace {

CommandResult Trellis(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), TRELLIS_CLI_PATH);
  CommandOptions options;
  options.timeout = std::chrono::seconds(30);
  options.extra_env = std::move(env);
  auto result = RunCommand(args, options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : CommandResult{-1, "", "", false};
}

// Port 1 on the loopback: nothing listens there, connections are refused.
constexpr const char* kNobody = "127.0.0.1:1";

TEST(CliBinaryTest, UnreachableControllerExits5AndNamesTheAddress) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--addr", kNobody, "ls"},
           {"show", "x-1", "--addr", kNobody},  // global flags may follow the verb
           {"--addr", kNobody, "cancel", "x-1"},
           {"--addr", kNobody, "watch", "x-1"},
           {"--addr", kNobody, "logs", "x-1"}}) {
    CommandResult r = Trellis(args);
    EXPECT_EQ(r.exit_code, 5) << args[2] << ": " << r.err;
    EXPECT_EQ(r.err.rfind("trellis: cannot reach the controller at 127.0.0.1:1", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("TRELLIS_ADDR"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST(CliBinaryTest, AddressComesFromTheEnvironment) {
  CommandResult r = Trellis({"ls", "--json"}, {{"TRELLIS_ADDR", kNobody}});
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.err.find("127.0.0.1:1"), std::string::npos) << r.err;
}

TEST(CliBinaryTest, UnreadableSpecExits2) {
  CommandResult r = Trellis({"--addr", kNobody, "submit", "/nonexistent/run.toml"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err,
            "trellis: cannot read spec file '/nonexistent/run.toml': "
            "No such file or directory\n");
}

TEST(CliBinaryTest, OversizedSpecIsRefusedLocally) {
  std::string path = ::testing::TempDir() + "/cli_big_spec.toml";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::string chunk(1 << 20, '#');
    std::fwrite(chunk.data(), 1, chunk.size(), f);
    std::fwrite("xx", 1, 2, f);
    std::fclose(f);
  }
  CommandResult r = Trellis({"--addr", kNobody, "submit", path});
  std::remove(path.c_str());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "trellis: spec: is 1048578 bytes; the limit is 1048576\n");
}

TEST(CliBinaryTest, UsageErrorsExit2) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"frobnicate"}, {}, {"show"}, {"ls", "--limit", "many"}, {"ls", "--bogus"}}) {
    CommandResult r = Trellis(args);
    EXPECT_EQ(r.exit_code, 2) << (args.empty() ? "" : args[0]) << ": " << r.err;
    EXPECT_EQ(r.err.rfind("trellis: ", 0), 0u) << r.err;
  }
}

TEST(CliBinaryTest, UnknownVerbIsNamed) {
  CommandResult r = Trellis({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("trellis: unknown verb 'frobnicate'", 0), 0u) << r.err;
}

TEST(CliBinaryTest, HelpAndVersionExit0) {
  CommandResult help = Trellis({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* verb : {"submit", "ls", "show", "watch", "logs", "cancel"}) {
    EXPECT_NE(help.out.find(verb), std::string::npos) << verb;
  }
  EXPECT_EQ(Trellis({"--version"}).exit_code, 0);
}

}  // namespace
}  // namespace trellis
