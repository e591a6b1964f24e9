#include "trainer_core/determinism.h"

#include <gtest/gtest.h>

namespace trellis::train {
namespace {

TEST(DeterminismTest, AnUnsetOrEmptyWorkspaceGetsTheLargeReproducibleOne) {
  for (const char* current : {static_cast<const char*>(nullptr), ""}) {
    CublasWorkspaceChoice c = ChooseCublasWorkspace(current);
    EXPECT_EQ(c.set_to, ":4096:8");
    EXPECT_EQ(c.problem, "");
  }
}

TEST(DeterminismTest, EitherReproducibleWorkspaceIsKept) {
  for (const char* current : {":4096:8", ":16:8"}) {
    CublasWorkspaceChoice c = ChooseCublasWorkspace(current);
    EXPECT_EQ(c.set_to, "") << current;
    EXPECT_EQ(c.problem, "") << current;
  }
}

TEST(DeterminismTest, AnyOtherWorkspaceIsRefusedNamingTheAcceptedValues) {
  for (const char* current : {":4096:2", "4096:8", ":4096:8 ", ":1024:8:16:8"}) {
    CublasWorkspaceChoice c = ChooseCublasWorkspace(current);
    EXPECT_EQ(c.set_to, "") << current;
    EXPECT_NE(c.problem.find(std::string("CUBLAS_WORKSPACE_CONFIG is \"") + current + "\""),
              std::string::npos)
        << c.problem;
    EXPECT_NE(c.problem.find("\":4096:8\" or \":16:8\""), std::string::npos) << c.problem;
  }
}

}  // namespace
}  // namespace trellis::train
