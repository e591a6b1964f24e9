#include "worker/io/cgroup_oom.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace trellis::worker {
namespace {

class CgroupOomTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trellis-cgroup-oom-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  static std::string Events(int oom_kill) {
    return "low 0\nhigh 0\nmax 12\noom 3\noom_kill " + std::to_string(oom_kill) +
           "\noom_group_kill 0\n";
  }

  std::string root_;
};

TEST_F(CgroupOomTest, V2ReadsSlurmsJobCgroupAboveTheTask) {
  Write("/proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n");
  const std::string job = "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_42";
  Write(job + "/memory.events", Events(2));
  Write(job + "/step_0/user/task_0/memory.events", Events(0));
  EXPECT_EQ(ReadJobOomKills(root_), 2);
}

TEST_F(CgroupOomTest, V2WithoutAJobCgroupReadsItsOwn) {
  Write("/proc/self/cgroup", "0::/user.slice/user-1000.slice/session-3.scope\n");
  Write("/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope/memory.events", Events(7));
  EXPECT_EQ(ReadJobOomKills(root_), 7);
}

TEST_F(CgroupOomTest, V1ReadsTheMemoryHierarchysJobCgroup) {
  Write("/proc/self/cgroup",
        "13:cpuset:/slurm/uid_1000/job_7/step_batch\n"
        "12:memory:/slurm/uid_1000/job_7/step_batch/task_0\n"
        "4:cpu,cpuacct:/slurm/uid_1000/job_7/step_batch/task_0\n"
        "0::/user.slice\n");
  Write("/sys/fs/cgroup/memory/slurm/uid_1000/job_7/memory.oom_control",
        "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n");
  Write("/sys/fs/cgroup/user.slice/memory.events", Events(99));
  EXPECT_EQ(ReadJobOomKills(root_), 5);
}

TEST_F(CgroupOomTest, UnreadableIsNullopt) {
  EXPECT_EQ(ReadJobOomKills(root_), std::nullopt);  // no /proc/self/cgroup
  Write("/proc/self/cgroup", "0::/job_1/step_0\n");
  EXPECT_EQ(ReadJobOomKills(root_), std::nullopt);  // no memory.events
  Write("/sys/fs/cgroup/job_1/memory.events", "low 0\nhigh 0\n");
  EXPECT_EQ(ReadJobOomKills(root_), std::nullopt);  // a kernel without oom_kill
  Write("/sys/fs/cgroup/job_1/memory.events", "oom_kill many\n");
  EXPECT_EQ(ReadJobOomKills(root_), std::nullopt);
  Write("/proc/self/cgroup", "5:cpu:/x\n");
  EXPECT_EQ(ReadJobOomKills(root_), std::nullopt);  // no memory controller at all
}

TEST(OomKillsBetweenTest, DifferenceOrMinusOne) {
  EXPECT_EQ(OomKillsBetween(3, 5), 2);
  EXPECT_EQ(OomKillsBetween(0, 0), 0);
  EXPECT_EQ(OomKillsBetween(std::nullopt, 5), -1);
  EXPECT_EQ(OomKillsBetween(3, std::nullopt), -1);
  EXPECT_EQ(OomKillsBetween(5, 3), -1);
}

}  // namespace
}  // namespace trellis::worker
