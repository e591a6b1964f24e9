#include "trainer_core/memory/host_room.h"

#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>

#include "trainer_core/files.h"

namespace trellis::train {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(HostRoomParseTest, MeminfoFiguresOfTheHostAndOfANode) {
  const std::string host = "MemTotal:       24683748 kB\nMemAvailable:   20000000 kB\n";
  EXPECT_EQ(MeminfoBytes(host, "MemTotal"), 24683748LL * 1024);
  EXPECT_EQ(MeminfoBytes(host, "MemAvailable"), 20000000LL * 1024);
  EXPECT_EQ(MeminfoBytes(host, "MemFree"), -1);
  const std::string node =
      "Node 1 MemTotal:  125829120 kB\nNode 1 MemFree:   1000 kB\nNode 1 Inactive(file): 24 kB\n";
  EXPECT_EQ(MeminfoBytes(node, "MemFree"), 1000 * 1024);
  EXPECT_EQ(MeminfoBytes(node, "Inactive(file)"), 24 * 1024);
  EXPECT_EQ(MeminfoBytes("MemFree: lots\n", "MemFree"), -1);
  EXPECT_EQ(CgroupStat("anon 10\ninactive_file 4096\nactive_file 7\n", "inactive_file"), 4096);
  EXPECT_EQ(CgroupStat("total_inactive_file 5\n", "inactive_file"), -1);
}

TEST(HostRoomFitTest, NamesTheTightestBound) {
  const std::vector<MemoryBound> bounds = {{"NUMA node 1", 20 * kGiB, 120 * kGiB},
                                           {"cgroup /slurm/job_7", 9 * kGiB, 64 * kGiB}};
  EXPECT_EQ(WhyItDoesNotFit(5 * kGiB, bounds, 4 * kGiB), "");
  EXPECT_EQ(WhyItDoesNotFit(6 * kGiB, bounds, 4 * kGiB),
            "cgroup /slurm/job_7 has 9.00 GiB available of 64.00 GiB; 6.00 GiB would leave "
            "less than 4.00 GiB free");
  EXPECT_EQ(WhyItDoesNotFit(100 * kGiB, {}, 4 * kGiB), "") << "no bound known: nothing refused";
}

// Ranks that take their copies from one bound at once need room for all of
// them (4 ranks on the NUMA node, each wanting 5 GiB, leave none of its 20),
// and the tightest bound is the one they would leave least of.
TEST(HostRoomFitTest, CountsEveryRankThatSharesABound) {
  std::vector<MemoryBound> bounds = {{"NUMA node 1", 20 * kGiB, 120 * kGiB},
                                     {"cgroup /slurm/job_7", 40 * kGiB, 64 * kGiB}};
  bounds[0].ranks = 4;
  bounds[1].ranks = 8;
  EXPECT_EQ(WhyItDoesNotFit(5 * kGiB, bounds, 4 * kGiB),
            "NUMA node 1 has 20.00 GiB available of 120.00 GiB; 4 ranks x 5.00 GiB would leave "
            "less than 4.00 GiB free");
  EXPECT_EQ(WhyItDoesNotFit(5 * kGiB, bounds, 0), "");
  EXPECT_EQ(WhyItDoesNotFit(static_cast<int64_t>(5.5 * kGiB), bounds, 0),
            "cgroup /slurm/job_7 has 40.00 GiB available of 64.00 GiB; 8 ranks x 5.50 GiB would "
            "leave less than 0.00 GiB free");
}

// Two hosts of two ranks each: socket 0 of host a has rank 0, socket 1 rank
// 1; host b's ranks are unbound. The cgroup path is the same on both hosts
// (a Slurm step's), shared only within one.
TEST(HostRoomFitTest, RanksSharingABoundAreThoseOfItsHost) {
  auto bounds = [](const std::string& where) {
    return std::vector<MemoryBound>{{where, 1, 1}, {"cgroup /slurm/job_7/step_0", 1, 1}};
  };
  const std::vector<std::vector<uint64_t>> keys = {
      BoundKeys("a", bounds("NUMA node 0")), BoundKeys("a", bounds("NUMA node 1")),
      BoundKeys("b", bounds("the host")), BoundKeys("b", bounds("the host"))};
  std::vector<uint64_t> all;
  for (const auto& k : keys) {
    all.insert(all.end(), k.begin(), k.end());
    all.push_back(0);  // a slot left empty
  }
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<MemoryBound> mine = bounds(rank < 2 ? (rank == 0 ? "NUMA node 0" : "NUMA node 1")
                                                    : "the host");
    SetRanksSharing(all, keys[rank], &mine);
    EXPECT_EQ(mine[0].ranks, rank < 2 ? 1 : 2) << "rank " << rank;
    EXPECT_EQ(mine[1].ranks, 2) << "rank " << rank;
  }
  EXPECT_NE(BoundKeys("a", bounds("x"))[0], BoundKeys("b", bounds("x"))[0]);
}

// The ranks are counted once, at start; a later check reads the bounds again
// (what is available now) and takes the counts over by name.
TEST(HostRoomFitTest, CountsCarryOverToBoundsReadLater) {
  std::vector<MemoryBound> counted = {{"NUMA node 1", 50 * kGiB, 120 * kGiB},
                                      {"cgroup /slurm/job_7", 60 * kGiB, 64 * kGiB}};
  counted[0].ranks = 2;
  counted[1].ranks = 4;
  std::vector<MemoryBound> now = {{"NUMA node 1", 9 * kGiB, 120 * kGiB},
                                  {"cgroup /slurm/job_7/step_0", 30 * kGiB, 64 * kGiB}};
  now[1].ranks = 3;
  CopyRanks(counted, &now);
  EXPECT_EQ(now[0].ranks, 2);
  EXPECT_EQ(now[0].available, 9 * kGiB);
  EXPECT_EQ(now[1].ranks, 1) << "a bound not counted is this rank's own";
  EXPECT_EQ(WhyItDoesNotFit(5 * kGiB, now, 0),
            "NUMA node 1 has 9.00 GiB available of 120.00 GiB; 2 ranks x 5.00 GiB would leave "
            "less than 0.00 GiB free");
}

class HostRoomReadTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = MakeTempDir("trellis-host-room-test"); }
  void TearDown() override { RemoveTree(root_); }
  void Write(const std::string& path, const std::string& text) {
    MakeDirs(DirName(root_ + path));
    std::ofstream(root_ + path) << text;
  }
  std::string root_;
};

TEST_F(HostRoomReadTest, ABoundRankSeesItsNodeAndEveryLimitingCgroupAbove) {
  Write("/proc/meminfo", "MemTotal: 500000000 kB\nMemAvailable: 400000000 kB\n");
  Write("/sys/devices/system/node/node1/meminfo",
        "Node 1 MemTotal: 125829120 kB\nNode 1 MemFree: 8388608 kB\n"
        "Node 1 Inactive(file): 2097152 kB\n");
  Write("/proc/self/cgroup", "0::/slurm/uid_0/job_7/step_0\n");
  // The job's limit; the step's cgroup has none ("max"), nor has the root.
  Write("/sys/fs/cgroup/slurm/uid_0/job_7/memory.max", std::to_string(64 * kGiB) + "\n");
  Write("/sys/fs/cgroup/slurm/uid_0/job_7/memory.current", std::to_string(60 * kGiB) + "\n");
  Write("/sys/fs/cgroup/slurm/uid_0/job_7/memory.stat",
        "anon 100\ninactive_file " + std::to_string(kGiB) + "\n");
  Write("/sys/fs/cgroup/slurm/uid_0/job_7/step_0/memory.max", "max\n");
  Write("/sys/fs/cgroup/slurm/uid_0/job_7/step_0/memory.current", "5\n");
  const auto bounds = ReadMemoryBounds(root_, {1});
  ASSERT_EQ(bounds.size(), 2u);
  EXPECT_EQ(bounds[0].where, "NUMA node 1");
  EXPECT_EQ(bounds[0].available, 10 * kGiB) << "free plus inactive page cache";
  EXPECT_EQ(bounds[0].total, 120 * kGiB);
  EXPECT_EQ(bounds[1].where, "cgroup /slurm/uid_0/job_7");
  EXPECT_EQ(bounds[1].available, 5 * kGiB) << "limit - usage + inactive page cache";
  EXPECT_EQ(bounds[1].total, 64 * kGiB);
}

TEST_F(HostRoomReadTest, AnUnboundRankSeesTheHostAndAV1MemoryCgroup) {
  Write("/proc/meminfo", "MemTotal: 16777216 kB\nMemAvailable: 8388608 kB\n");
  Write("/proc/self/cgroup", "5:devices:/\n4:memory:/job_3\n0::/\n");
  Write("/sys/fs/cgroup/memory/job_3/memory.limit_in_bytes", std::to_string(4 * kGiB));
  Write("/sys/fs/cgroup/memory/job_3/memory.usage_in_bytes", std::to_string(3 * kGiB));
  Write("/sys/fs/cgroup/memory/job_3/memory.stat", "total_inactive_file 0\n");
  Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");  // none
  Write("/sys/fs/cgroup/memory/memory.usage_in_bytes", "1\n");
  const auto bounds = ReadMemoryBounds(root_, {});
  ASSERT_EQ(bounds.size(), 2u);
  EXPECT_EQ(bounds[0].where, "the host");
  EXPECT_EQ(bounds[0].available, 8 * kGiB);
  EXPECT_EQ(bounds[1].where, "cgroup /job_3");
  EXPECT_EQ(bounds[1].available, kGiB);
}

TEST_F(HostRoomReadTest, WhatCannotBeReadIsNoBound) {
  // A node without a meminfo (not present), no cgroup file.
  EXPECT_TRUE(ReadMemoryBounds(root_, {3}).empty());
  EXPECT_TRUE(ReadMemoryBounds(root_, {}).empty());
}

TEST(HostRoomMachineTest, ThisMachineHasABoundAndThisThreadIsNotBound) {
  // Outside numactl --membind: no binding; /proc/meminfo is always there.
  EXPECT_TRUE(MemoryBindNodes().empty());
  const auto bounds = ReadMemoryBounds("", {});
  ASSERT_FALSE(bounds.empty());
  EXPECT_EQ(bounds[0].where, "the host");
  EXPECT_GT(bounds[0].available, 0);
  EXPECT_GE(bounds[0].total, bounds[0].available);
}

TEST(HostRoomMachineTest, AThreadBoundToANodeSeesThatNode) {
  // What numactl --membind=0 sets, for this thread only (MPOL_BIND = 2).
  unsigned long node0 = 1;
  ASSERT_EQ(::syscall(SYS_set_mempolicy, 2, &node0, sizeof(node0) * 8), 0);
  const auto nodes = MemoryBindNodes();
  const auto bounds = ReadMemoryBounds("", nodes);
  ASSERT_EQ(::syscall(SYS_set_mempolicy, 0, nullptr, 0), 0);  // MPOL_DEFAULT again
  EXPECT_EQ(nodes, std::vector<int>{0});
  ASSERT_FALSE(bounds.empty());
  EXPECT_EQ(bounds[0].where, "NUMA node 0");
  EXPECT_GT(bounds[0].total, 0);
}

}  // namespace
}  // namespace trellis::train
