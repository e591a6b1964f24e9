// The CLI's pure helpers about what users type and are told back: --since,
// the hint added to a refused retry.
#include <gtest/gtest.h>

#include "cli/format.h"

namespace trellis::cli {
namespace {

TEST(CliFormatTest, RetryOfARunWithoutCheckpointSaysSoAndHowToStartAgain) {
  // The controller's refusal of "tiny-3@latest" (controller/app/init_from.cc).
  const std::string refusal =
      "training.init_from: run tiny-3 has no complete checkpoint (in /out/runs/tiny-3/checkpoints)";
  EXPECT_EQ(RetryRefusalHint("tiny-3", refusal),
            "tiny-3 has no checkpoint to resume from; `trellis retry tiny-3 --fresh` starts it "
            "again from step 0");
  // Another run's words, a missing named step, any other refusal: nothing added.
  EXPECT_EQ(RetryRefusalHint("tiny-30", refusal), "");
  EXPECT_EQ(RetryRefusalHint("tiny-3", "training.init_from: run tiny-3 has no complete "
                                       "checkpoint of step 15; its complete steps: 10, 20"),
            "");
  EXPECT_EQ(RetryRefusalHint("tiny-3", "slurm.nodes: must be at least 1"), "");
}

TEST(CliFormatTest, SinceTakesDurationsAndTimes) {
  std::string error;
  const int64_t now = 1796665897123;
  EXPECT_EQ(ParseSince("90s", now, &error), now - 90000);
  EXPECT_EQ(ParseSince("10m", now, &error), now - 600000);
  EXPECT_EQ(ParseSince("1.5h", now, &error), now - 5400000);
  EXPECT_EQ(ParseSince("1d", now, &error), now - 86400000);
  EXPECT_EQ(ParseSince("2026-12-07T17:51:37Z", now, &error), 1796665897000);
  EXPECT_EQ(ParseSince("2026-12-07T17:51Z", now, &error), 1796665860000);
  ASSERT_TRUE(ParseSince("2026-12-07 17:51", now, &error).has_value());  // local time
  for (const char* bad : {"", "10", "10x", "-5m", "yesterday", "2026-12-07", "2026-12-07T17:51Q"}) {
    EXPECT_EQ(ParseSince(bad, now, &error), std::nullopt) << bad;
    EXPECT_NE(error.find("is not a duration (90s, 10m, 2h, 1d) or a time"), std::string::npos);
  }
}

}  // namespace
}  // namespace trellis::cli
