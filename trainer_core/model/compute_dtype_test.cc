#include "trainer_core/model/compute_dtype.h"

#include <gtest/gtest.h>

namespace trellis::train {
namespace {

// Flag sets as /proc/cpuinfo shows them (abridged to what matters).
const CpuFlags kAvx2Only = {"fpu", "sse4_2", "avx", "avx2", "fma"};           // Zen 3, Haswell
const CpuFlags kAvx512NoBf16 = {"avx2", "avx512f", "avx512bw", "avx512vl"};   // Skylake-SP
const CpuFlags kAvx512Bf16 = {"avx2", "avx512f", "avx512bw", "avx512_bf16"};  // Cooper Lake, Zen 4
const CpuFlags kAmx = {"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"};     // Sapphire Rapids
const CpuFlags kAmxTileOnly = {"avx512f", "amx_tile"};
const CpuFlags kNone;  // /proc/cpuinfo unreadable

struct Case {
  const char* name;
  const char* spec;
  bool on_cuda;
  const CpuFlags* cpu;
  ComputeDtype want;
  const char* described;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ChooseComputeDtypeTest : public ::testing::TestWithParam<Case> {};

TEST_P(ChooseComputeDtypeTest, Table) {
  const Case& c = GetParam();
  ComputeDtypeChoice got = ChooseComputeDtype(c.spec, c.on_cuda, *c.cpu);
  EXPECT_EQ(got.dtype, c.want);
  EXPECT_EQ(DescribeComputeDtype(got), c.described);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ChooseComputeDtypeTest,
    ::testing::Values(
        Case{"AutoCuda", "auto", true, &kAvx2Only, ComputeDtype::kBFloat16,
             "bfloat16 (auto: CUDA)"},
        Case{"AutoAvx2", "auto", false, &kAvx2Only, ComputeDtype::kFloat32,
             "float32 (auto: the CPU has no bf16 instructions)"},
        Case{"AutoAvx512WithoutBf16", "auto", false, &kAvx512NoBf16, ComputeDtype::kFloat32,
             "float32 (auto: the CPU has no bf16 instructions)"},
        Case{"AutoAvx512Bf16", "auto", false, &kAvx512Bf16, ComputeDtype::kBFloat16,
             "bfloat16 (auto: the CPU has avx512_bf16)"},
        Case{"AutoAmxNamedFirst", "auto", false, &kAmx, ComputeDtype::kBFloat16,
             "bfloat16 (auto: the CPU has amx_bf16)"},
        Case{"AmxTileIsNotBf16", "auto", false, &kAmxTileOnly, ComputeDtype::kFloat32,
             "float32 (auto: the CPU has no bf16 instructions)"},
        Case{"AutoNoFlagsRead", "auto", false, &kNone, ComputeDtype::kFloat32,
             "float32 (auto: the CPU has no bf16 instructions)"},
        Case{"Float32Named", "float32", true, &kAmx, ComputeDtype::kFloat32, "float32"},
        Case{"Bfloat16Named", "bfloat16", false, &kAvx2Only, ComputeDtype::kBFloat16, "bfloat16"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ParseCpuFlagsTest, FirstFlagsLine) {
  const char* cpuinfo =
      "processor\t: 0\n"
      "vendor_id\t: GenuineIntel\n"
      "flags\t\t: fpu sse2 avx512f avx512_bf16\n"
      "vmx flags\t: vnmi ept\n"
      "bugs\t\t: spectre_v1\n"
      "\n"
      "processor\t: 1\n"
      "flags\t\t: fpu other\n";
  EXPECT_EQ(ParseCpuFlags(cpuinfo), (CpuFlags{"fpu", "sse2", "avx512f", "avx512_bf16"}));
}

TEST(ParseCpuFlagsTest, NoFlagsLine) {
  // aarch64 names its list "Features"; not x86 flags, so nothing counts.
  EXPECT_TRUE(ParseCpuFlags("processor\t: 0\nFeatures\t: fp asimd bf16\n").empty());
  EXPECT_TRUE(ParseCpuFlags("").empty());
  EXPECT_TRUE(ParseCpuFlags("flags").empty());
}

// The I/O part: whatever this machine is, its flags parse and agree with the
// pure function (x86 Linux always lists fpu).
TEST(HostCpuFlagsTest, ReadsThisMachine) {
  const CpuFlags& flags = HostCpuFlags();
#if defined(__x86_64__) && defined(__linux__)
  EXPECT_EQ(flags.count("fpu"), 1u);
#endif
  EXPECT_EQ(&flags, &HostCpuFlags());  // read once
  const bool bf16 = !CpuBf16Flag(flags).empty();
  EXPECT_EQ(ChooseComputeDtype("auto", false).dtype,
            bf16 ? ComputeDtype::kBFloat16 : ComputeDtype::kFloat32);
  RecordProperty("auto_cpu_dtype", ComputeDtypeName(ChooseComputeDtype("auto", false).dtype));
}

}  // namespace
}  // namespace trellis::train
