// The resolved spec: every key the parser accepts is written, and parsing
// what was written gives the same spec back.
#include "common/spec/spec_writer.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include <toml++/toml.h>

namespace trellis::spec {
namespace {

// Non-default values everywhere they may be.
const char* kModelSpec = R"(
[job]
name = "moe"
output_dir = "team/moe"
[slurm]
partition = "gpu"
account = "proj7"
nodes = 2
ranks_per_node = 2
gpus_per_node = 4
spare_nodes = 1
time_limit = "1-00:00:00"
nodelist = "node[1-3]"
extra_args = ["--qos=high"]
signal_grace_s = 300
[gate]
min_free_gib_per_socket = 80.5
timeout_s = 60
touch_probe = true
[restart]
max_restarts = 5
continuation_lead_s = 3600
spare_pool_nodes = 2
[health]
straggler_window = 30
straggler_factor = 1.25
[env]
NCCL_DEBUG = "INFO"
QUOTE = "a \"b\" \\ c"
[model]
layers = 4
hidden = 128
shared_expert = true
norm_eps = 1e-6
[parallel]
grad_reduce_dtype = "float32"
offload_fraction = 0.5
[training]
steps = 50
lr = 0.001
seed = 7
data = "/data/c.corpus"
dtype = "bfloat16"
[checkpoint]
every_steps = "auto"
async = true
)";

RunSpec Parse(const std::string& text) {
  FieldErrors errors;
  auto s = ParseRunSpec(text, &errors);
  EXPECT_TRUE(s) << JoinErrors(errors) << "\n" << text;
  return s ? *s : RunSpec{};
}

TEST(SpecWriterTest, WhatIsWrittenParsesToTheSameSpec) {
  for (const std::string& text :
       {std::string(kModelSpec),
        std::string("[job]\nname = 'hello'\ncommand = 'echo \"$RANK\"'\n"),
        std::string("[job]\nname = 'argv'\ncommand = ['/bin/echo', 'a b']\n"
                    "[slurm]\nnodes = 3\n")}) {
    const std::string written = ResolvedSpecToml(Parse(text));
    const RunSpec again = Parse(written);
    EXPECT_EQ(ResolvedSpecToml(again), written);
  }
  const RunSpec s = Parse(ResolvedSpecToml(Parse(kModelSpec)));
  EXPECT_EQ(s.slurm.time_limit_minutes, 1440);
  EXPECT_EQ(s.restart.continuation_lead_s, 3600);
  EXPECT_TRUE(s.trainer.checkpoint.every_steps_auto);
  EXPECT_EQ(s.env.at("QUOTE"), "a \"b\" \\ c");
  EXPECT_DOUBLE_EQ(s.trainer.training.lr, 0.001);
  EXPECT_DOUBLE_EQ(s.trainer.model.norm_eps, 1e-6);
  EXPECT_EQ(Parse("[job]\nname='a'\ncommand=['/bin/echo','x']\n").job.command,
            Parse(ResolvedSpecToml(Parse("[job]\nname='a'\ncommand=['/bin/echo','x']\n")))
                .job.command);
}

// The keys the parser accepts in `section`, from its own error on a key it
// does not know.
std::set<std::string> AcceptedKeys(const std::string& written, const std::string& section) {
  toml::table root = toml::parse(written);
  root[section].as_table()->insert("zz_not_a_key", 1);
  std::ostringstream o;
  o << toml::toml_formatter(root);
  FieldErrors errors;
  ParseRunSpec(o.str(), &errors);
  for (const FieldError& e : errors) {
    if (e.field != section + ".zz_not_a_key") continue;
    std::set<std::string> keys;
    std::string list = e.message.substr(e.message.find("accepted keys: ") + 15);
    std::stringstream in(list);
    for (std::string k; std::getline(in, k, ',');) keys.insert(k.substr(k.find_first_not_of(' ')));
    return keys;
  }
  ADD_FAILURE() << "no unknown-key error for " << section;
  return {};
}

// The keys written in `section`, set or shown commented out with their default.
std::set<std::string> WrittenKeys(const std::string& written, const std::string& section) {
  std::set<std::string> keys;
  std::stringstream in(written);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '[') {
      inside = line == "[" + section + "]";
      continue;
    }
    if (!inside || line.empty()) continue;
    if (line.rfind("# ", 0) == 0) line = line.substr(2);
    keys.insert(line.substr(0, line.find(" = ")));
  }
  return keys;
}

TEST(SpecWriterTest, EveryKeyTheParserAcceptsIsWritten) {
  const std::string written = ResolvedSpecToml(Parse(kModelSpec));
  for (const char* section : {"job", "slurm", "gate", "restart", "health", "notify", "model",
                              "parallel", "training", "checkpoint"}) {
    std::set<std::string> accepted = AcceptedKeys(written, section);
    if (std::string(section) == "job") accepted.insert("command");  // read apart (Known)
    std::set<std::string> keys = WrittenKeys(written, section);
    if (std::string(section) == "job") keys.insert("command");  // a [model] run has none
    EXPECT_EQ(keys, accepted) << "[" << section << "]\n" << written;
  }
}

TEST(SpecWriterTest, LineageNamesTheSourceRunOrDirectory) {
  TrainingSpec t;
  EXPECT_EQ(DescribeInitFrom(t), "");
  EXPECT_EQ(InitFromSource(t), "");
  t.init_state = "weights";
  t.init_from = "/out/runs/tiny-moe-3/checkpoints@40";
  EXPECT_EQ(DescribeInitFrom(t), "tiny-moe-3 at step 40 (weights)");
  EXPECT_EQ(InitFromSource(t), "tiny-moe-3@40");
  // The source's step kept in the fork's own directory names the same run.
  t.init_from = "/out/runs/tiny-fork-4/init-from/tiny-moe-3/checkpoints@40";
  EXPECT_EQ(InitFromSource(t), "tiny-moe-3@40");
  t.init_from = "/data/pretrained@7";
  EXPECT_EQ(DescribeInitFrom(t), "/data/pretrained at step 7 (weights)");
  EXPECT_EQ(InitFromSource(t), "/data/pretrained@7");
}

}  // namespace
}  // namespace trellis::spec
