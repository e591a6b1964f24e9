// Runs against this machine's real NUMA node 0 with small bounds.
#include "worker/io/touch_probe.h"

#include <gtest/gtest.h>
#include <numa.h>

#include <iostream>

namespace trellis::worker {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(TouchProbeTest, Node0ObtainsTheBoundWithinTheBudget) {
  TouchProbeLimits limits;
  limits.max_bytes = 64 * kMiB;
  limits.chunk_bytes = 16 * kMiB;
  limits.budget = std::chrono::seconds(10);
  auto r = TouchProbe(0, limits);
  if (numa_available() < 0) {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("not available"), std::string::npos) << r.status();
    GTEST_SKIP() << "no NUMA on this machine: " << r.status();
  }
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(r->obtainable_bytes, limits.max_bytes);
  EXPECT_EQ(r->stopped_by, "bound");
  EXPECT_LT(r->elapsed, limits.budget);
  std::cout << "node 0: " << r->obtainable_bytes << " bytes touched in " << r->elapsed.count()
            << " s\n";
  RecordProperty("obtainable_bytes", std::to_string(r->obtainable_bytes));
  RecordProperty("elapsed_seconds", std::to_string(r->elapsed.count()));
}

TEST(TouchProbeTest, StopsAtTheTimeBudget) {
  if (numa_available() < 0) GTEST_SKIP() << "no NUMA on this machine";
  TouchProbeLimits limits;
  limits.max_bytes = int64_t{1} << 40;  // far more than the machine has
  limits.budget = std::chrono::milliseconds(1);
  auto r = TouchProbe(0, limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(r->obtainable_bytes, limits.max_bytes);
  EXPECT_EQ(r->stopped_by, "time budget");
  // The child checks the clock every 2 MiB; the parent's kill is 5 s later.
  EXPECT_LT(r->elapsed, std::chrono::seconds(5));
}

TEST(TouchProbeTest, UnknownNodeIsAnError) {
  if (numa_available() < 0) GTEST_SKIP() << "no NUMA on this machine";
  auto r = TouchProbe(numa_max_node() + 1, TouchProbeLimits{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("does not exist on this machine"), std::string::npos)
      << r.status();
  EXPECT_FALSE(TouchProbe(-1, TouchProbeLimits{}).ok());
}

TEST(TouchProbeTest, NonPositiveLimitsAreRefused) {
  if (numa_available() < 0) GTEST_SKIP() << "no NUMA on this machine";
  TouchProbeLimits limits;
  limits.max_bytes = 0;
  auto r = TouchProbe(0, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace trellis::worker
