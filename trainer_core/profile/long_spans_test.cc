#include "trainer_core/profile/long_spans.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace trellis::train {
namespace {

constexpr uint64_t kMs = 1'000'000;

TEST(LongSpansTest, ListsLongHostCallsAndDeviceCopiesInTimeOrder) {
  // Thread 500 starts first (1), thread 42 second (2); a 0.5 ms call and a
  // long kernel are left out.
  const std::vector<HostSpan> host = {{12 * kMs, 110 * kMs, 42, "cudaEventSynchronize"},
                                      {10 * kMs, 108 * kMs, 500, "aten::to"},
                                      {10 * kMs + 1000, 108 * kMs, 500, "cudaStreamSynchronize"},
                                      {11 * kMs, 11 * kMs + kMs / 2, 500, "cudaLaunchKernel"}};
  const std::vector<DeviceSpan> device = {
      {11 * kMs, 128 * kMs, 13, "Memcpy DtoH (Device -> Pinned)"},
      {10 * kMs, 60 * kMs, 7, "nvjet_gemm"}};
  const std::string out = FormatLongSpans(host, device, kMs, 10);
  const auto at = [&](const std::string& s) { return out.find(s); };
  ASSERT_NE(at("aten::to"), std::string::npos) << out;
  EXPECT_LT(at("aten::to"), at("cudaStreamSynchronize")) << "outer call first at the same start";
  EXPECT_LT(at("cudaStreamSynchronize"), at("Memcpy DtoH")) << out;
  EXPECT_LT(at("Memcpy DtoH"), at("cudaEventSynchronize")) << out;
  EXPECT_NE(out.find("    0.00     98.00  host thread 1      aten::to"), std::string::npos) << out;
  EXPECT_NE(out.find("    1.00    117.00  device stream 13"), std::string::npos) << out;
  EXPECT_NE(out.find("host thread 2      cudaEventSynchronize"), std::string::npos) << out;
  EXPECT_EQ(at("cudaLaunchKernel"), std::string::npos) << out;
  EXPECT_EQ(at("nvjet_gemm"), std::string::npos) << out;
}

TEST(LongSpansTest, KeepsTheLongestWhenThereAreMoreThanTheLimit) {
  std::vector<HostSpan> host;
  for (uint64_t i = 0; i < 5; ++i)
    host.push_back({i * 10 * kMs, i * 10 * kMs + (i + 1) * kMs, 1, "call" + std::to_string(i)});
  const std::string out = FormatLongSpans(host, {}, kMs, 2);
  EXPECT_NE(out.find("call4"), std::string::npos) << out;
  EXPECT_NE(out.find("call3"), std::string::npos) << out;
  EXPECT_EQ(out.find("call2"), std::string::npos) << out;
  EXPECT_LT(out.find("call3"), out.find("call4")) << "still in time order";
}

TEST(LongSpansTest, NothingLongSaysNone) {
  EXPECT_NE(FormatLongSpans({{0, 10, 1, "short"}}, {}, kMs, 5).find("(none)"), std::string::npos);
}

TEST(LongSpansTest, ASpanEndingBeforeItStartsIsRefusedByName) {
  try {
    FormatLongSpans({{10, 5, 1, "backwards"}}, {}, kMs, 5);
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'backwards'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trellis::train
