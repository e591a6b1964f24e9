#include "controller/core/slurm_facts.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

TEST(SlurmFactsTest, JobStatesAreTypedWithTheirTerminalFlag) {
  for (const char* word : {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                           "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED"}) {
    SlurmJobState state(word);
    EXPECT_NE(state.base(), SlurmJobState::kOther) << word;
    EXPECT_TRUE(state.terminal()) << word;
    EXPECT_EQ(state.name(), word);
  }
  for (const char* word : {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING"}) {
    EXPECT_NE(SlurmJobState(word).base(), SlurmJobState::kOther) << word;
    EXPECT_FALSE(SlurmJobState(word).terminal()) << word;
  }
  EXPECT_EQ(SlurmJobState("TIMEOUT"), SlurmJobState::kTimeout);
  EXPECT_EQ(SlurmJobState("PREEMPTED"), SlurmJobState::kPreempted);
}

TEST(SlurmFactsTest, AJobStateNotInTheTableIsLiveAndKeepsItsWord) {
  SlurmJobState configuring("CONFIGURING");
  EXPECT_EQ(configuring.base(), SlurmJobState::kOther);
  EXPECT_FALSE(configuring.terminal()) << "a state Slurm adds later is taken as live";
  EXPECT_EQ(configuring.name(), "CONFIGURING");
  EXPECT_FALSE(SlurmJobState().terminal());
  EXPECT_FALSE(SlurmJobState("completed").terminal()) << "Slurm's words are upper case";
}

TEST(SlurmFactsTest, NodeStatesSplitIntoABaseAndFlags) {
  SlurmNodeState down("down*");
  EXPECT_EQ(down.base(), SlurmNodeState::kDown);
  EXPECT_TRUE(down.has(SlurmNodeState::kFlagNotResponding));
  EXPECT_FALSE(down.has(SlurmNodeState::kFlagPoweredDown));
  EXPECT_EQ(down.name(), "down");

  SlurmNodeState sleeping("idle~");
  EXPECT_EQ(sleeping.base(), SlurmNodeState::kIdle);
  EXPECT_TRUE(sleeping.has(SlurmNodeState::kFlagPoweredDown));

  EXPECT_EQ(SlurmNodeState("drained").base(), SlurmNodeState::kDrained);
  EXPECT_EQ(SlurmNodeState("drain").base(), SlurmNodeState::kDrained);
  EXPECT_EQ(SlurmNodeState("draining").base(), SlurmNodeState::kDraining);
  EXPECT_EQ(SlurmNodeState("failing").base(), SlurmNodeState::kFailing);
  EXPECT_EQ(SlurmNodeState("reboot_issued").base(), SlurmNodeState::kReboot) << "by prefix";
  EXPECT_EQ(SlurmNodeState("mixed-").base(), SlurmNodeState::kMixed);
  EXPECT_TRUE(SlurmNodeState("mixed-").has(SlurmNodeState::kFlagPlanned));
  EXPECT_EQ(SlurmNodeState("blocked").base(), SlurmNodeState::kOther);
  EXPECT_EQ(SlurmNodeState("blocked").name(), "blocked");
}

TEST(SlurmFactsTest, UsableNodes) {
  for (const char* word : {"idle", "allocated", "mixed", "completing", "reserved", "planned",
                           "idle%", "idle!", "mixed-", "idle@", "idle^", "idle$", "blocked"})
    EXPECT_TRUE(IsUsableNodeState(word)) << word;
  for (const char* word : {"down", "down*", "drained", "drain", "draining", "fail", "failing",
                           "unknown", "not_responding", "future", "maint", "reboot",
                           "reboot_issued", "idle*", "idle~", "idle#", "allocated*"})
    EXPECT_FALSE(IsUsableNodeState(word)) << word;
}

TEST(SlurmFactsTest, NodeNames) {
  EXPECT_TRUE(IsNodeName("node-1.rack_2"));
  EXPECT_FALSE(IsNodeName(""));
  EXPECT_FALSE(IsNodeName("node 1"));
  EXPECT_FALSE(IsNodeName("node;rm"));
  EXPECT_FALSE(IsNodeName(std::string(256, 'n')));
  EXPECT_TRUE(IsNodeName(std::string(255, 'n')));
}

}  // namespace
}  // namespace trellis::controller
