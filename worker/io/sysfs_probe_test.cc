// ProbeNode against the fixture trees in tests/fixtures/sysfs (made by make.sh
// there) and against broken copies of them.
#include "worker/io/sysfs_probe.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace trellis::worker {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kKiB = 1024;
const std::string kFixtures = TRELLIS_SYSFS_FIXTURES;

// The fixtures' figures in kB: round(GiB * 1048576), as make-fixture writes them.
constexpr int64_t kTotal = 125514547;                           // 119.7 GiB
constexpr int64_t kHbmTotal = 100663296, kHbmFree = 100034150;  // 96.0, 95.4 GiB

struct Socket {
  int node;
  const char* cpulist;
  int64_t free_kb;
  int64_t unattributed_kb;
};

struct FixtureCase {
  const char* name;
  std::vector<Socket> sockets;  // every one of kTotal, and HBM nodes 4, 12, 20, 28
};

void PrintTo(const FixtureCase& c, std::ostream* os) { *os << c.name; }

class FixtureTest : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(FixtureTest, FiguresToTheKilobyte) {
  const FixtureCase& c = GetParam();
  auto probe = ProbeNode(kFixtures + "/" + c.name);
  ASSERT_TRUE(probe.ok()) << probe.status();
  ASSERT_EQ(probe->sockets.size(), c.sockets.size());
  for (size_t i = 0; i < c.sockets.size(); ++i) {
    const SocketProbe& got = probe->sockets[i];
    const Socket& want = c.sockets[i];
    SCOPED_TRACE(want.node);
    EXPECT_EQ(got.numa_node, want.node);
    EXPECT_EQ(got.cpulist, want.cpulist);
    EXPECT_EQ(got.total_bytes, kTotal * kKiB);
    EXPECT_EQ(got.free_bytes, want.free_kb * kKiB);
    EXPECT_EQ(got.unattributed_bytes, want.unattributed_kb * kKiB);
    EXPECT_EQ(got.hugepages_bytes, 0);
    EXPECT_FALSE(got.touch_obtainable_bytes.has_value());
  }
  ASSERT_EQ(probe->device_nodes.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(probe->device_nodes[i].numa_node, 4 + 8 * static_cast<int>(i));
    EXPECT_EQ(probe->device_nodes[i].total_bytes, kHbmTotal * kKiB);
    EXPECT_EQ(probe->device_nodes[i].free_bytes, kHbmFree * kKiB);
  }
}

// free: 108 -> 113246208, 100.7 -> 105591603, 104.5 -> 109576192, 96.3 ->
// 100977869, 94.0 -> 98566144, 72.7 -> 76231475 kB. unattributed: 8.0 ->
// 8388608, 10.9 -> 11429478, 9.5 -> 9961472, 12.0 -> 12582912, 17.6 ->
// 18454938, 39.9 -> 41838182 kB.
INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTest,
                         ::testing::Values(FixtureCase{"gh200-node",
                                                       {{0, "0-71", 113246208, 8388608},
                                                        {1, "72-143", 105591603, 11429478},
                                                        {2, "144-215", 109576192, 9961472},
                                                        {3, "216-287", 100977869, 12582912}}},
                                           FixtureCase{"report-median",
                                                       {{0, "0-71", 105591603, 11429478},
                                                        {1, "72-143", 105591603, 11429478},
                                                        {2, "144-215", 105591603, 11429478},
                                                        {3, "216-287", 105591603, 11429478}}},
                                           FixtureCase{"report-p90",
                                                       {{0, "0-71", 98566144, 18454938},
                                                        {1, "72-143", 98566144, 18454938},
                                                        {2, "144-215", 98566144, 18454938},
                                                        {3, "216-287", 98566144, 18454938}}},
                                           FixtureCase{"report-worst",
                                                       {{0, "0-71", 105591603, 11429478},
                                                        {1, "72-143", 105591603, 11429478},
                                                        {2, "144-215", 76231475, 41838182},
                                                        {3, "216-287", 105591603, 11429478}}}),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(SysfsProbeTest, EveryCategoryOfOneSocket) {
  auto probe = ProbeNode(kFixtures + "/gh200-node");
  ASSERT_TRUE(probe.ok()) << probe.status();
  const SocketProbe& s = probe->sockets[1];  // node1/meminfo
  EXPECT_EQ(s.file_pages_bytes, 4246732 * kKiB);
  EXPECT_EQ(s.anon_pages_bytes, 2123366 * kKiB);
  EXPECT_EQ(s.slab_bytes, 1783627 * kKiB);
  EXPECT_EQ(s.kernel_stack_bytes, 169869 * kKiB);
  EXPECT_EQ(s.page_tables_bytes, 169872 * kKiB);
  EXPECT_EQ(s.shmem_bytes, 169869 * kKiB);
}

TEST(SysfsProbeTest, SocketNodesAreTheNodesWithCpus) {
  auto nodes = SocketNodes(kFixtures + "/gh200-node");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(*nodes, (std::vector<int>{0, 1, 2, 3}));
}

TEST(SysfsProbeTest, ThisMachinesRealSysfs) {
  if (!fs::exists("/sys/devices/system/node/node0")) GTEST_SKIP() << "no NUMA nodes in /sys";
  auto probe = ProbeNode("/sys");
  ASSERT_TRUE(probe.ok()) << probe.status();
  ASSERT_FALSE(probe->sockets.empty());
  EXPECT_GT(probe->sockets[0].total_bytes, 0);
  EXPECT_LE(probe->sockets[0].free_bytes, probe->sockets[0].total_bytes);
}

// A writable copy of a fixture, to break.
class BrokenTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trellis-sysfs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::copy(kFixtures + "/gh200-node", root_, fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string Node(int n, const std::string& file) {
    return root_ + "/devices/system/node/node" + std::to_string(n) + "/" + file;
  }
  std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::trunc) << text;
  }
  void Edit(const std::string& path, const std::string& from, const std::string& to) {
    std::string text = Read(path);
    size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    Write(path, text.replace(at, from.size(), to));
  }
  // The probe fails with a message that names `file` and says `what`.
  void ExpectError(const std::string& file, const std::string& what) {
    auto probe = ProbeNode(root_);
    ASSERT_FALSE(probe.ok());
    EXPECT_NE(probe.status().message().find(file), std::string::npos) << probe.status();
    EXPECT_NE(probe.status().message().find(what), std::string::npos) << probe.status();
  }
  std::string root_;
};

TEST_F(BrokenTreeTest, MissingMeminfo) {
  fs::remove(Node(2, "meminfo"));
  ExpectError(Node(2, "meminfo"), "No such file");
}

TEST_F(BrokenTreeTest, GarbageNumber) {
  Edit(Node(1, "meminfo"), "4246732 kB", "42x6732 kB");
  ExpectError(Node(1, "meminfo"), "FilePages:");
}

TEST_F(BrokenTreeTest, TruncatedFile) {
  Write(Node(3, "meminfo"), Read(Node(3, "meminfo")).substr(0, 300));
  ExpectError(Node(3, "meminfo"), "truncated");
}

TEST_F(BrokenTreeTest, FileCutAtALineEnd) {
  std::string text = Read(Node(0, "meminfo"));
  Write(Node(0, "meminfo"), text.substr(0, text.find("Node 0 Slab:")));
  ExpectError(Node(0, "meminfo"), "required field Slab is missing");
}

TEST_F(BrokenTreeTest, NodeDirWithoutCpulist) {
  fs::remove(Node(12, "cpulist"));
  ExpectError(Node(12, "cpulist"), "No such file");
}

TEST_F(BrokenTreeTest, OtherNodesLines) {
  Edit(Node(0, "meminfo"), "Node 0 MemFree:", "Node 1 MemFree:");
  ExpectError(Node(0, "meminfo"), "names node 1, expected 0");
}

TEST_F(BrokenTreeTest, OversizedFile) {
  Write(Node(0, "cpulist"), std::string(100 * 1024, '0') + "\n");
  ExpectError(Node(0, "cpulist"), "larger than 65536 bytes");
}

TEST_F(BrokenTreeTest, NoNodeDirectories) {
  for (int n : {0, 1, 2, 3, 4, 12, 20, 28}) fs::remove_all(Node(n, ""));
  ExpectError(root_ + "/devices/system/node", "no nodeN directories");
}

TEST_F(BrokenTreeTest, MissingRoot) {
  auto probe = ProbeNode(root_ + "/nowhere");
  ASSERT_FALSE(probe.ok());
  EXPECT_NE(probe.status().message().find("/nowhere/devices/system/node does not exist"),
            std::string::npos)
      << probe.status();
}

TEST_F(BrokenTreeTest, OnlyCpulessNodes) {
  for (int n : {0, 1, 2, 3}) Write(Node(n, "cpulist"), "\n");
  ExpectError(root_ + "/devices/system/node", "no NUMA node with CPUs");
}

TEST_F(BrokenTreeTest, OtherEntriesAreSkipped) {
  Write(root_ + "/devices/system/node/nodefoo/meminfo", "junk");
  Write(root_ + "/devices/system/node/node9", "a file, not a node directory");
  auto probe = ProbeNode(root_);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->sockets.size(), 4u);
}

// node0: used 12268339 kB of which 8 GiB unattributed before hugepages.
TEST_F(BrokenTreeTest, PerNodeHugepagesCountEverySize) {
  Write(Node(0, "hugepages/hugepages-2048kB/nr_hugepages"), "512\n");
  Write(Node(0, "hugepages/hugepages-1048576kB/nr_hugepages"), "2\n");
  auto probe = ProbeNode(root_);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->sockets[0].hugepages_bytes, int64_t{3} << 30);
  EXPECT_EQ(probe->sockets[0].unattributed_bytes, int64_t{5} << 30);
}

TEST_F(BrokenTreeTest, MalformedHugepageCount) {
  Write(Node(0, "hugepages/hugepages-2048kB/nr_hugepages"), "lots\n");
  ExpectError(Node(0, "hugepages/hugepages-2048kB/nr_hugepages"), "expected a page count");
}

TEST_F(BrokenTreeTest, HugepagesTotalTimesTheOnlySizeListed) {
  Edit(Node(0, "meminfo"), "HugePages_Total:     0", "HugePages_Total:   512");
  auto probe = ProbeNode(root_);  // no kernel/mm/hugepages: 2 MiB
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->sockets[0].hugepages_bytes, int64_t{1} << 30);
  EXPECT_EQ(probe->sockets[0].unattributed_bytes, int64_t{7} << 30);

  fs::create_directories(root_ + "/kernel/mm/hugepages/hugepages-524288kB");  // arm64, 64K pages
  probe = ProbeNode(root_);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->sockets[0].hugepages_bytes, int64_t{256} << 30);
  EXPECT_EQ(probe->sockets[0].unattributed_bytes, 0);  // clamped

  fs::create_directories(root_ + "/kernel/mm/hugepages/hugepages-2048kB");  // two sizes: 2 MiB
  probe = ProbeNode(root_);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->sockets[0].hugepages_bytes, int64_t{1} << 30);
}

}  // namespace
}  // namespace trellis::worker
