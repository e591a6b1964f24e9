#include "trainer_core/parallel/nccl_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "trainer_core/files.h"
#include "trainer_core/parallel/nccl_log_file.h"

namespace trellis::train {
namespace {

// Rank 0 of a world-2 run on one host (NCCL 2.21, NCCL_DEBUG=INFO,
// NCCL_DEBUG_SUBSYS=ALL): the world's communicator, set up at the first
// collective, with lines of other subsystems around its INIT lines.
constexpr const char* kWorldComm = R"(gpu-node-7:2345:2345 [0] NCCL INFO Bootstrap : Using eth0:10.1.2.3<0>
gpu-node-7:2345:2345 [0] NCCL INFO cudaDriverVersion 12040
gpu-node-7:2345:2345 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
gpu-node-7:2345:2402 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)
gpu-node-7:2345:2402 [0] NCCL INFO NET/IB : No device found.
gpu-node-7:2345:2402 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.2.3<0>
gpu-node-7:2345:2402 [0] NCCL INFO Using network Socket
gpu-node-7:2345:2402 [0] NCCL INFO ncclCommInitRank comm 0x55d0c8a0e2c0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x8a0f6e3b1b2c4d5e - Init START
gpu-node-7:2345:2402 [0] NCCL INFO Setting affinity for GPU 0 to ffff,ffffffff
gpu-node-7:2345:2402 [0] NCCL INFO NCCL_MAX_CTAS set by environment to 16.
gpu-node-7:2345:2402 [0] NCCL INFO comm 0x55d0c8a0e2c0 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
gpu-node-7:2345:2402 [0] NCCL INFO Channel 00/16 :    0   1
gpu-node-7:2345:2402 [0] NCCL INFO Channel 01/16 :    0   1
gpu-node-7:2345:2402 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1
gpu-node-7:2345:2402 [0] NCCL INFO P2P Chunksize set to 524288
gpu-node-7:2345:2402 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
gpu-node-7:2345:2402 [0] NCCL INFO Connected all rings
gpu-node-7:2345:2402 [0] NCCL INFO Connected all trees
gpu-node-7:2345:2402 [0] NCCL INFO threadThresholds 8/8/64 | 16/8/64 | 512 | 512
gpu-node-7:2345:2402 [0] NCCL INFO 16 coll channels, 16 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer
gpu-node-7:2345:2402 [0] NCCL INFO TUNER/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory : when loading libnccl-tuner.so
gpu-node-7:2345:2402 [0] NCCL INFO ncclCommInitRank comm 0x55d0c8a0e2c0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x8a0f6e3b1b2c4d5e - Init COMPLETE
)";

// A second communicator (an expert-parallel subgroup) with more channels, a
// warning, and a line of another rank's process in a shared file.
constexpr const char* kSubgroupComm = R"(gpu-node-7:2345:2410 [0] NCCL INFO ncclCommInitRank comm 0x55d0c9b11a00 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1c2d3e4f5a6b7c8d - Init START
gpu-node-7:2345:2410 [0] NCCL WARN Cuda failure 'out of memory' (retrying)
gpu-node-7:2345:2410 [0] NCCL INFO Channel 00/24 :    0   1
gpu-node-7:2345:2410 [0] NCCL INFO 24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 8 p2p channels per peer
gpu-node-7:2345:2410 [0] NCCL INFO ncclCommInitRank comm 0x55d0c9b11a00 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1c2d3e4f5a6b7c8d - Init COMPLETE
)";

TEST(ParseNcclChannelsTest, OneCommunicator) {
  auto c = ParseNcclChannels(kWorldComm);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->coll, 16);
  EXPECT_EQ(c->p2p_per_peer, 32);
  EXPECT_EQ(c->communicators, 1);
}

TEST(ParseNcclChannelsTest, TheMostOfSeveralCommunicators) {
  auto c = ParseNcclChannels(std::string(kWorldComm) + kSubgroupComm);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->coll, 24);
  EXPECT_EQ(c->p2p_per_peer, 32);
  EXPECT_EQ(c->communicators, 2);
  // Order does not matter.
  c = ParseNcclChannels(std::string(kSubgroupComm) + kWorldComm);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->coll, 24);
  EXPECT_EQ(c->p2p_per_peer, 32);
}

TEST(ParseNcclChannelsTest, OlderAndNewerLineFormats) {
  // NCCL 2.12: no collnet or nvls counts.
  auto c = ParseNcclChannels(
      "n1:77:90 [3] NCCL INFO 32 coll channels, 32 p2p channels, 4 p2p channels per peer\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->coll, 32);
  EXPECT_EQ(c->p2p_per_peer, 4);
  // A timestamp in front (NCCL_DEBUG_TIMESTAMP_FORMAT), no trailing newline,
  // CRLF endings.
  c = ParseNcclChannels(
      "[2025-01-02 03:04:05] n1:77:90 [3] NCCL INFO 8 coll channels, 8 collnet channels, 2 nvls "
      "channels, 8 p2p channels, 1 p2p channels per peer\r");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->coll, 8);
  EXPECT_EQ(c->p2p_per_peer, 1);
  // Without the per-peer part.
  c = ParseNcclChannels("h:1:1 [0] NCCL INFO 2 coll channels\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->coll, 2);
  EXPECT_EQ(c->p2p_per_peer, std::nullopt);
}

TEST(ParseNcclChannelsTest, NoCommunicatorLineIsNullopt) {
  EXPECT_EQ(ParseNcclChannels(""), std::nullopt);
  const std::string world(kWorldComm);
  // Everything but the channel line.
  std::string without;
  size_t at = 0;
  for (size_t nl; (nl = world.find('\n', at)) != std::string::npos; at = nl + 1) {
    const std::string line = world.substr(at, nl + 1 - at);
    if (line.find("coll channels") == std::string::npos) without += line;
  }
  EXPECT_EQ(ParseNcclChannels(without), std::nullopt);
  // Look-alikes: not NCCL's INFO line, or the count not opening the message.
  for (const char* text :
       {"24 coll channels, 24 collnet channels\n",
        "h:1:1 [0] NCCL WARN 24 coll channels, 24 collnet channels\n",
        "h:1:1 [0] NCCL INFO comm 0x1 24 coll channels\n",
        "h:1:1 [0] NCCL INFO 24 collnet channels, 0 nvls channels\n",
        "h:1:1 [0] NCCL INFO x24 coll channels\n",
        "h:1:1 [0] NCCL INFO  coll channels\n",
        "h:1:1 [0] NCCL INFO 12345678901 coll channels\n"}) {
    EXPECT_EQ(ParseNcclChannels(text), std::nullopt) << text;
  }
}

TEST(NcclDebugFileTest, HostAndPidPatternsAsNcclExpandsThem) {
  EXPECT_EQ(ExpandNcclDebugFile("/logs/nccl.%h.%p.log", "gpu7.cluster.example", 4242),
            "/logs/nccl.gpu7.4242.log");
  EXPECT_EQ(ExpandNcclDebugFile("plain.log", "h", 1), "plain.log");
  EXPECT_EQ(ExpandNcclDebugFile("a%%p%xc%", "h", 1), "a%p%xc%");
}

TEST(NcclDebugFileTest, SubsystemsThatLogInit) {
  EXPECT_TRUE(NcclSubsysLogsInit(std::nullopt));
  EXPECT_TRUE(NcclSubsysLogsInit("INIT"));
  EXPECT_TRUE(NcclSubsysLogsInit("net,init"));
  EXPECT_TRUE(NcclSubsysLogsInit("ALL"));
  EXPECT_TRUE(NcclSubsysLogsInit("^NET,COLL"));
  EXPECT_FALSE(NcclSubsysLogsInit("NET,COLL"));
  EXPECT_FALSE(NcclSubsysLogsInit("^INIT"));
  EXPECT_FALSE(NcclSubsysLogsInit("^ALL"));
  EXPECT_FALSE(NcclSubsysLogsInit(""));
}

TEST(PlanNcclLogTest, WhatIsSetAndWhatIsRead) {
  using Set = std::vector<std::pair<std::string, std::string>>;
  const std::string own = "/ckpt/nccl-rank1.log";
  // Nothing set: INFO for INIT, to the rank's own file (empty counts as unset).
  for (auto debug : {std::optional<std::string>(), std::optional<std::string>("")}) {
    auto p = PlanNcclLog({debug, "/user/ignored.log", "NET"}, own, "h", 7);
    EXPECT_EQ(p.set, (Set{{"NCCL_DEBUG", "INFO"},
                          {"NCCL_DEBUG_SUBSYS", "INIT"},
                          {"NCCL_DEBUG_FILE", own}}));
    EXPECT_EQ(p.follow, own);
    EXPECT_NE(p.note.find(own), std::string::npos) << p.note;
  }
  // The user's level and file: theirs is read, nothing is changed.
  auto p = PlanNcclLog({"info", "/logs/nccl.%h.%p", std::nullopt}, own, "gpu7.x", 99);
  EXPECT_TRUE(p.set.empty());
  EXPECT_EQ(p.follow, "/logs/nccl.gpu7.99");
  p = PlanNcclLog({"TRACE", "/logs/n", "INIT,NET"}, own, "h", 1);
  EXPECT_EQ(p.follow, "/logs/n");
  // The user's level without a file: standard output, not reported.
  p = PlanNcclLog({"INFO", std::nullopt, std::nullopt}, own, "h", 1);
  EXPECT_TRUE(p.set.empty());
  EXPECT_EQ(p.follow, "");
  EXPECT_NE(p.note.find("not reported"), std::string::npos) << p.note;
  // A file that will hold no INIT lines is not read.
  p = PlanNcclLog({"WARN", "/logs/n", std::nullopt}, own, "h", 1);
  EXPECT_EQ(p.follow, "");
  EXPECT_NE(p.note.find("NCCL_DEBUG=WARN"), std::string::npos) << p.note;
  p = PlanNcclLog({"INFO", "/logs/n", "NET"}, own, "h", 1);
  EXPECT_EQ(p.follow, "");
  EXPECT_NE(p.note.find("NCCL_DEBUG_SUBSYS=NET"), std::string::npos) << p.note;
}

TEST(PlanNcclBlockingWaitTest, OffUnlessBothNamesSayFalse) {
  using Env = NcclBlockingWaitEnv;
  const std::optional<std::string> unset;
  // Unset, empty, or one of PyTorch's false values: nothing to do.
  for (const Env& env : {Env{unset, unset}, Env{"", ""}, Env{"0", unset}, Env{"false", "no"},
                         Env{"N", "F"}, Env{unset, "0"}}) {
    auto p = PlanNcclBlockingWait(env);
    EXPECT_FALSE(p.turn_off) << env.torch_name.value_or("-") << " " << env.old_name.value_or("-");
    EXPECT_EQ(p.note, "");
  }
  // A true value under either name, or a value PyTorch refuses: off, named.
  auto p = PlanNcclBlockingWait({"1", unset});
  EXPECT_TRUE(p.turn_off);
  EXPECT_EQ(p.note.rfind("TORCH_NCCL_BLOCKING_WAIT=1 turned off", 0), 0u) << p.note;
  EXPECT_NE(p.note.find("TRELLIS_COMM_TIMEOUT_S"), std::string::npos) << p.note;
  p = PlanNcclBlockingWait({"0", "True"});  // the old name is still read, then overridden
  EXPECT_TRUE(p.turn_off);
  EXPECT_EQ(p.note.rfind("NCCL_BLOCKING_WAIT=True turned off", 0), 0u) << p.note;
  p = PlanNcclBlockingWait({"yes", "maybe"});
  EXPECT_TRUE(p.turn_off);
  EXPECT_EQ(p.note.rfind("TORCH_NCCL_BLOCKING_WAIT=yes and NCCL_BLOCKING_WAIT=maybe", 0), 0u)
      << p.note;
}

class NcclLogFileTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("trellis-nccl-log-test"); }
  void TearDown() override { RemoveTree(dir_); }
  void Append(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::app) << text;
  }
  std::string dir_;
};

TEST_F(NcclLogFileTest, FollowsWhatNcclAppendsUntilFound) {
  const std::string path = JoinPath(dir_, "nccl.log");
  NcclLogFollower f(path);
  EXPECT_EQ(f.Poll(), std::nullopt);  // NCCL has not opened it yet
  const std::string world(kWorldComm);
  const size_t cut = world.find("coll channels");  // mid-line: not read as a line yet
  Append(path, world.substr(0, cut));
  EXPECT_EQ(f.Poll(), std::nullopt);
  Append(path, world.substr(cut));
  auto c = f.Poll();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->coll, 16);
  EXPECT_TRUE(f.done());
  // Found: the file is not read again.
  Append(path, kSubgroupComm);
  c = f.Poll();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->coll, 16);
}

TEST_F(NcclLogFileTest, SeveralCommunicatorsInOnePoll) {
  const std::string path = JoinPath(dir_, "nccl.log");
  Append(path, std::string(kWorldComm) + kSubgroupComm);
  NcclLogFollower f(path);
  auto c = f.Poll();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->coll, 24);
  EXPECT_EQ(c->communicators, 2);
}

TEST_F(NcclLogFileTest, GivesUpAfterItsPolls) {
  const std::string path = JoinPath(dir_, "nccl.log");
  NcclLogFollower f(path, 3);
  for (int i = 0; i < 3; ++i) {
    Append(path, "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0\n");
    EXPECT_EQ(f.Poll(), std::nullopt);
  }
  EXPECT_TRUE(f.done());
  Append(path, kWorldComm);
  EXPECT_EQ(f.Poll(), std::nullopt);  // not read any more
}

// The environment of this test process is changed and restored.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST_F(NcclLogFileTest, SetUpPointsNcclAtTheRanksFile) {
  ScopedEnv debug("NCCL_DEBUG", nullptr), file("NCCL_DEBUG_FILE", nullptr),
      subsys("NCCL_DEBUG_SUBSYS", nullptr), tmp("TMPDIR", dir_.c_str());
  const std::string ckpt = JoinPath(dir_, "run/checkpoints");
  NcclLogPlan p = SetUpNcclLog(3, ckpt);
  EXPECT_EQ(p.follow, JoinPath(ckpt, "nccl-rank3.log"));
  EXPECT_TRUE(IsDirectory(ckpt));  // made for the log
  EXPECT_STREQ(std::getenv("NCCL_DEBUG"), "INFO");
  EXPECT_STREQ(std::getenv("NCCL_DEBUG_SUBSYS"), "INIT");
  EXPECT_EQ(std::getenv("NCCL_DEBUG_FILE"), p.follow);

  // No checkpoint directory: TMPDIR, with the pid.
  ::unsetenv("NCCL_DEBUG");
  p = SetUpNcclLog(0, "");
  EXPECT_EQ(p.follow,
            JoinPath(dir_, "trellis-nccl-rank0-" + std::to_string(::getpid()) + ".log"));
  EXPECT_EQ(std::getenv("NCCL_DEBUG_FILE"), p.follow);
}

TEST_F(NcclLogFileTest, SetUpLeavesTheUsersSettingsAlone) {
  const std::string theirs = JoinPath(dir_, "theirs.%p.log");
  ScopedEnv debug("NCCL_DEBUG", "INFO"), file("NCCL_DEBUG_FILE", theirs.c_str()),
      subsys("NCCL_DEBUG_SUBSYS", nullptr);
  const std::string ckpt = JoinPath(dir_, "checkpoints");
  NcclLogPlan p = SetUpNcclLog(0, ckpt);
  EXPECT_TRUE(p.set.empty());
  EXPECT_EQ(p.follow, JoinPath(dir_, "theirs." + std::to_string(::getpid()) + ".log"));
  EXPECT_FALSE(PathExists(ckpt));  // nothing of ours is written
  EXPECT_EQ(std::getenv("NCCL_DEBUG_FILE"), theirs);
}

TEST_F(NcclLogFileTest, BlockingWaitIsTurnedOffInTheEnvironment) {
  {
    ScopedEnv torch_name("TORCH_NCCL_BLOCKING_WAIT", "1"), old_name("NCCL_BLOCKING_WAIT", "1");
    EXPECT_NE(TurnOffNcclBlockingWait(), "");
    EXPECT_STREQ(std::getenv("TORCH_NCCL_BLOCKING_WAIT"), "0");
    EXPECT_EQ(std::getenv("NCCL_BLOCKING_WAIT"), nullptr);
  }
  ScopedEnv torch_name("TORCH_NCCL_BLOCKING_WAIT", nullptr), old_name("NCCL_BLOCKING_WAIT", "0");
  EXPECT_EQ(TurnOffNcclBlockingWait(), "");
  EXPECT_EQ(std::getenv("TORCH_NCCL_BLOCKING_WAIT"), nullptr);  // nothing set when nothing asked
  EXPECT_STREQ(std::getenv("NCCL_BLOCKING_WAIT"), "0");
}

}  // namespace
}  // namespace trellis::train
