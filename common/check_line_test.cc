#include "common/check_line.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

TEST(CheckLine, TextAndJsonRoundTrip) {
  CheckLine l{"node node3: numa", CheckLine::Verdict::kFail,
              "cannot read /sys/devices/system/node: \"quoted\"; run on a node with sysfs"};
  EXPECT_EQ(FormatCheckLine(l), "FAIL  node node3: numa: cannot read /sys/devices/system/node: "
                                "\"quoted\"; run on a node with sysfs");
  auto back = ParseCheckLineJson(CheckLineJson(l));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->name, l.name);
  EXPECT_EQ(back->verdict, l.verdict);
  EXPECT_EQ(back->detail, l.detail);
  EXPECT_EQ(FormatCheckLine({"munge", CheckLine::Verdict::kOk, "credential decoded"}),
            "ok    munge: credential decoded");
}

TEST(CheckLine, WhatIsNotACheckLineIsRefused) {
  EXPECT_FALSE(ParseCheckLineJson("srun: error: ...").ok());
  EXPECT_FALSE(ParseCheckLineJson(R"({"check": "x"})").ok());
  auto bad = ParseCheckLineJson(R"({"check": "x", "verdict": "fine"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'fine'"), std::string::npos);
}

TEST(CheckLine, AnyFailed) {
  EXPECT_FALSE(AnyFailed({{"a", CheckLine::Verdict::kOk, ""}, {"b", CheckLine::Verdict::kWarn, ""},
                          {"c", CheckLine::Verdict::kSkip, ""}}));
  EXPECT_TRUE(
      AnyFailed({{"a", CheckLine::Verdict::kOk, ""}, {"b", CheckLine::Verdict::kFail, ""}}));
}

}  // namespace
}  // namespace trellis
