#include "worker/core/memory_probe.h"

#include <gtest/gtest.h>

#include "absl/strings/str_replace.h"

namespace trellis::worker {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kGiB = int64_t{1} << 30;

// A per-node meminfo as Linux writes it (this machine's node 0, trimmed).
constexpr const char* kMeminfo =
    "Node 0 MemTotal:       15165212 kB\n"
    "Node 0 MemFree:        10710984 kB\n"
    "Node 0 MemUsed:         4454228 kB\n"
    "Node 0 Active(anon):       1544 kB\n"
    "Node 0 FilePages:       4035724 kB\n"
    "Node 0 Mapped:            11792 kB\n"
    "Node 0 AnonPages:         14360 kB\n"
    "Node 0 Shmem:              8956 kB\n"
    "Node 0 KernelStack:        1416 kB\n"
    "Node 0 PageTables:         1812 kB\n"
    "Node 0 Slab:             313468 kB\n"
    "Node 0 FileHugePages:     79872 kB\n"
    "Node 0 HugePages_Total:     0\n"
    "Node 0 HugePages_Free:      0\n"
    "Node 0 HugePages_Surp:      0\n";

TEST(MemoryProbeTest, ParsesTheKernelsPerNodeFormat) {
  auto m = ParseNodeMeminfo(kMeminfo, 0, "node0/meminfo");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->mem_total_kb, 15165212);
  EXPECT_EQ(m->mem_free_kb, 10710984);
  EXPECT_EQ(m->file_pages_kb, 4035724);
  EXPECT_EQ(m->anon_pages_kb, 14360);
  EXPECT_EQ(m->slab_kb, 313468);
  EXPECT_EQ(m->kernel_stack_kb, 1416);
  EXPECT_EQ(m->page_tables_kb, 1812);
  EXPECT_EQ(m->shmem_kb, 8956);
  EXPECT_EQ(m->hugepages_total, 0);
}

TEST(MemoryProbeTest, UnattributedLeavesShmemOutAndCountsHugepages) {
  NodeMeminfo m;
  m.mem_total_kb = 1000;
  m.mem_free_kb = 400;  // used 600
  m.file_pages_kb = 100;
  m.shmem_kb = 50;  // inside file_pages: adding it would hide 50 kB
  m.anon_pages_kb = 80;
  m.slab_kb = 60;
  m.kernel_stack_kb = 10;
  m.page_tables_kb = 20;
  m.hugepages_total = 0;
  SocketProbe s = MakeSocket(3, {"0-1", 2}, m, 200 * kKiB);
  EXPECT_EQ(s.numa_node, 3);
  EXPECT_EQ(s.cpulist, "0-1");
  EXPECT_EQ(s.total_bytes, 1000 * kKiB);
  EXPECT_EQ(s.free_bytes, 400 * kKiB);
  EXPECT_EQ(s.shmem_bytes, 50 * kKiB);
  EXPECT_EQ(s.hugepages_bytes, 200 * kKiB);
  // 600 - (100 + 80 + 60 + 10 + 20 + 200)
  EXPECT_EQ(s.unattributed_bytes, 130 * kKiB);
}

TEST(MemoryProbeTest, UnattributedClampsAtZero) {
  NodeMeminfo m;
  m.mem_total_kb = 1000;
  m.mem_free_kb = 900;
  m.file_pages_kb = 150;  // counters read a moment apart overshoot used memory
  EXPECT_EQ(MakeSocket(0, {"0", 1}, m, 0).unattributed_bytes, 0);
}

TEST(MemoryProbeTest, HugepagesFromPerSizeCountsOrTheDefaultSize) {
  NodeMeminfo m;
  m.hugepages_total = 3;
  EXPECT_EQ(HugepagesBytes(m, {}, 2 << 20), 6 << 20);
  // The per-node directories also count 1 GiB pages, which HugePages_Total leaves out.
  EXPECT_EQ(HugepagesBytes(m, {{2 << 20, 3}, {kGiB, 2}}, 2 << 20), (6 << 20) + 2 * kGiB);
}

struct BadMeminfo {
  const char* name;
  std::string text;
  const char* message;  // a substring of the error
};

void PrintTo(const BadMeminfo& c, std::ostream* os) { *os << c.name; }

class BadMeminfoTest : public ::testing::TestWithParam<BadMeminfo> {};

TEST_P(BadMeminfoTest, FailsNamingTheFileAndField) {
  auto m = ParseNodeMeminfo(GetParam().text, 0, "/x/node0/meminfo");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("/x/node0/meminfo"), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find(GetParam().message), std::string::npos) << m.status();
}

std::string Replace(const char* from, const char* to) {
  return absl::StrReplaceAll(kMeminfo, {{from, to}});
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadMeminfoTest,
    ::testing::Values(
        BadMeminfo{"MissingField", Replace("Node 0 Slab:             313468 kB\n", ""),
                   "required field Slab is missing"},
        BadMeminfo{"GarbageNumber", Replace("10710984", "10x10984"), "line 2"},
        BadMeminfo{"NegativeNumber", Replace("10710984", "-10710984"), "line 2"},
        BadMeminfo{"Overflow", Replace("10710984", "99999999999999999999"), "line 2"},
        BadMeminfo{"NodeMismatch", Replace("Node 0 AnonPages", "Node 1 AnonPages"),
                   "line 7 (AnonPages): names node 1, expected 0"},
        BadMeminfo{"Duplicate", std::string(kMeminfo) + "Node 0 MemFree: 1 kB\n",
                   "MemFree appears twice"},
        BadMeminfo{"MissingUnit", Replace("313468 kB", "313468"), "Slab lacks its kB unit"},
        BadMeminfo{"UnitOnCount", Replace("HugePages_Total:     0", "HugePages_Total: 0 kB"),
                   "HugePages_Total has a unit"},
        BadMeminfo{"Truncated", std::string(kMeminfo).substr(0, 200), "truncated"},
        BadMeminfo{"Empty", "", "empty file"},
        BadMeminfo{"NotMeminfo", "MemTotal: 1 kB\n", "line 1: expected"},
        BadMeminfo{"FreeAboveTotal", Replace("10710984", "20710984"), "exceeds MemTotal"},
        BadMeminfo{"Oversized", std::string(kMaxSysfsFileBytes + 1, '\n'), "larger than"}));

TEST(MemoryProbeTest, AcceptsUnknownFields) {
  auto m = ParseNodeMeminfo(std::string(kMeminfo) + "Node 0 Future_Field(x):  7 kB\n", 0, "m");
  EXPECT_TRUE(m.ok()) << m.status();
}

struct CpulistCase {
  const char* text;
  int count;  // -1: an error
};

class CpulistTest : public ::testing::TestWithParam<CpulistCase> {};

TEST_P(CpulistTest, Count) {
  auto c = ParseCpulist(GetParam().text, "/x/node1/cpulist");
  if (GetParam().count < 0) {
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("/x/node1/cpulist"), std::string::npos) << c.status();
    return;
  }
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->count, GetParam().count);
  std::string text = GetParam().text;
  EXPECT_EQ(c->text, text.substr(0, text.size() - 1));
}

INSTANTIATE_TEST_SUITE_P(Cases, CpulistTest,
                         ::testing::Values(CpulistCase{"0-71\n", 72}, CpulistCase{"72-143\n", 72},
                                           CpulistCase{"0-3,8-11\n", 8}, CpulistCase{"5\n", 1},
                                           CpulistCase{"0,2,4-5\n", 4}, CpulistCase{"\n", 0},
                                           CpulistCase{"0-71", -1}, CpulistCase{"", -1},
                                           CpulistCase{"3-1\n", -1}, CpulistCase{"0-3,2-5\n", -1},
                                           CpulistCase{"a\n", -1}, CpulistCase{"0-\n", -1},
                                           CpulistCase{"-1\n", -1}, CpulistCase{",\n", -1},
                                           CpulistCase{"0 -3\n", -1}, CpulistCase{"0-3\n\n", -1},
                                           CpulistCase{"99999999\n", -1}));

TEST(MemoryProbeTest, HugepageDirNames) {
  EXPECT_EQ(*ParseHugepageDirName("hugepages-2048kB"), 2 << 20);
  EXPECT_EQ(*ParseHugepageDirName("hugepages-1048576kB"), kGiB);
  for (const char* bad :
       {"hugepages-kB", "hugepages-0kB", "hugepages-2048", "x-2048kB", "hugepages-20x8kB"})
    EXPECT_FALSE(ParseHugepageDirName(bad).ok()) << bad;
}

TEST(MemoryProbeTest, SysfsRootFlagThenEnvironmentThenSys) {
  EXPECT_EQ(ResolveSysfsRoot("/flag", "/env/%n", "node3"), "/flag");
  EXPECT_EQ(ResolveSysfsRoot("", "/c/nodes/%n/sysfs", "node3"), "/c/nodes/node3/sysfs");
  EXPECT_EQ(ResolveSysfsRoot("", "/c/nodes/node3/sysfs", "node4"), "/c/nodes/node3/sysfs");
  EXPECT_EQ(ResolveSysfsRoot("", "", "node3"), "/sys");
  EXPECT_EQ(ResolveSysfsRoot("", nullptr, "node3"), "/sys");
}

TEST(MemoryProbeTest, FormatGibOneDecimal) {
  EXPECT_EQ(FormatGib(125514547 * kKiB), "119.7");
  EXPECT_EQ(FormatGib(0), "0.0");
}

}  // namespace
}  // namespace trellis::worker
