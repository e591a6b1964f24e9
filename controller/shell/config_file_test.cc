#include "controller/shell/config_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "controller/shell/flags.h"

namespace trellis::controller {
namespace {

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/tmp/trellis-config-test-" + std::to_string(::getpid()) + ".toml";
    AddControllerFlags(app_, flags_);
  }
  void TearDown() override { std::remove(path_.c_str()); }
  // The flags after --config path_ (holding `toml`) and `args`; the error's
  // text when there is one.
  std::string Load(const std::string& toml, std::vector<std::string> args = {}) {
    std::ofstream(path_) << toml;
    args.insert(args.begin(), {"--config", path_});
    auto full = ArgsWithConfigFile(app_, args);
    if (!full.ok()) return std::string(full.status().message());
    std::reverse(full->begin(), full->end());
    app_.parse(*full);
    return "";
  }
  CLI::App app_;
  ControllerFlags flags_;
  std::string path_;
};

TEST_F(ConfigFileTest, KeysAreFlagsAndTheCommandLineWins) {
  ASSERT_EQ(Load("db = \"/state/controller.db\"\noutput-root = \"/scratch/runs\"\n"
                 "listen = \"0.0.0.0:50151\"\ninsecure_tcp = true\n"
                 "data-root = [\"/scratch\", \"/home\"]\nschedule-interval-ms = 250\n"
                 "node-mtbf-prior-hours = 2.5e4\nslurm-can-drain = false\n",
                 {"--listen", "127.0.0.1:1"}),
            "");
  EXPECT_EQ(flags_.db_path, "/state/controller.db");
  EXPECT_EQ(flags_.config.output_root, "/scratch/runs");
  EXPECT_EQ(flags_.listen, "127.0.0.1:1");  // the command line's
  EXPECT_TRUE(flags_.insecure_tcp);         // insecure_tcp: '_' for '-'
  EXPECT_EQ(flags_.config.data_roots, (std::vector<std::string>{"/scratch", "/home"}));
  EXPECT_EQ(flags_.schedule_ms, 250);
  EXPECT_DOUBLE_EQ(flags_.config.node_mtbf_prior_hours, 2.5e4);
  EXPECT_FALSE(flags_.config.can_drain);
}

// certify-return is on unless a file or the command line turns it off.
TEST_F(ConfigFileTest, CertifiedReturnIsOnByDefaultAndCanBeTurnedOff) {
  ASSERT_EQ(Load("certify-timeout-s = 60\ncertify-command = \"true\"\n"), "");
  ControllerConfig on = ConfigFromFlags(flags_);
  EXPECT_TRUE(on.quarantine.certify_return);
  EXPECT_EQ(on.quarantine.certify_timeout, std::chrono::seconds(60));
  EXPECT_EQ(on.certify.command, "true");
  ASSERT_EQ(Load("certify-return = false\n"), "");
  EXPECT_FALSE(ConfigFromFlags(flags_).quarantine.certify_return);
  ASSERT_EQ(Load("certify-return = false\n", {"--certify-return"}), "");
  EXPECT_TRUE(flags_.certify_return);  // the command line's
  ASSERT_EQ(Load("", {"--no-certify-return"}), "");
  EXPECT_FALSE(flags_.certify_return);
  EXPECT_THROW(Load("certify-timeout-s = 0\n"), CLI::ValidationError);
}

TEST_F(ConfigFileTest, WhatIsWrongIsNamedWithWhatIsAccepted) {
  const std::string at = "--config " + path_ + ": ";
  EXPECT_EQ(Load("db = \"/x\"\nlistn = \"h:1\"\n"),
            at + "'listn' is no flag of trellis-controller (did you mean listen?); the keys are "
                 "the flags' long names, docs/controller-config.md lists them");
  EXPECT_EQ(Load("schedule-interval-ms = \"fast\"\n"),
            at + "schedule-interval-ms takes an integer");
  EXPECT_EQ(Load("data-root = \"/one\"\n"), at + "data-root takes a list of strings");
  EXPECT_EQ(Load("[listen]\nport = 1\n"), at + "listen takes a string, not a table");
  EXPECT_NE(Load("db = \"/x\n").find(at + "line 1, column"), std::string::npos);
  std::ofstream(path_) << "# nothing set\n";
  auto empty = ArgsWithConfigFile(app_, {"--config", path_, "--db", "/x"});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, (std::vector<std::string>{"--config", path_, "--db", "/x"}));
  auto missing = ArgsWithConfigFile(app_, {"--config", "/no/such/file.toml"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--config /no/such/file.toml: "), std::string::npos)
      << missing.status();
}

// Every flag has its key: a file setting each one to a value of its type
// loads, and the reference lists each, as docs/controller-config.md does.
TEST_F(ConfigFileTest, EveryFlagIsAKeyAndTheReferenceIsTheDocs) {
  const std::string reference = ConfigReference(app_);
  std::string toml;
  int keys = 0;
  std::istringstream rows(reference);
  for (std::string row; std::getline(rows, row);) {
    if (row.rfind("| `", 0) != 0) continue;
    // | `key` | type | `default` or - | what |
    std::vector<std::string> cells;
    for (size_t at = 2, bar; (bar = row.find(" | ", at)) != std::string::npos; at = bar + 3)
      cells.push_back(row.substr(at, bar - at));
    ASSERT_GE(cells.size(), 3u) << row;
    auto unquoted = [](const std::string& c) {
      return c.size() > 1 && c.front() == '`' ? c.substr(1, c.size() - 2) : c;
    };
    const std::string key = unquoted(cells[0]), type = cells[1], fallback = unquoted(cells[2]);
    ++keys;
    // A string: its default where it is one word (a choice among words then
    // passes its check), else a URL, which passes the URL's check too.
    const bool word =
        !fallback.empty() && fallback != "-" && fallback.find(' ') == std::string::npos;
    if (type == "string") toml += key + " = \"" + (word ? fallback : "http://x") + "\"\n";
    if (type == "integer") toml += key + " = 1\n";
    if (type == "number") toml += key + " = 1.5\n";
    if (type == "boolean") toml += key + " = true\n";
    if (type == "list of strings") toml += key + " = [\"/a\"]\n";
  }
  EXPECT_GT(keys, 30);
  EXPECT_EQ(Load(toml), "") << toml;

  std::ifstream in(std::string(TRELLIS_SOURCE_DIR) + "/docs/controller-config.md");
  std::stringstream docs;
  docs << in.rdbuf();
  EXPECT_NE(docs.str().find(reference), std::string::npos)
      << "docs/controller-config.md is not trellis-controller's reference; write it again with "
         "trellis-controller --config-reference:\n"
      << reference;
}

}  // namespace
}  // namespace trellis::controller
