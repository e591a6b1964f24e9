#include "controller/core/run_state.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>

namespace trellis::controller {
namespace {

using S = RunState;

TEST(RunStateTest, TableIsIndexedByState) {
  for (size_t i = 0; i < AllRunStates().size(); ++i)
    EXPECT_EQ(static_cast<size_t>(AllRunStates()[i].state), i);
}

TEST(RunStateTest, ExactlyTheDocumentedTransitionsAreAllowed) {
  const std::set<std::pair<S, S>> allowed = {
      {S::kQueued, S::kSubmitted},     {S::kQueued, S::kCancelled},
      {S::kQueued, S::kFailed},        {S::kSubmitted, S::kGating},
      {S::kSubmitted, S::kRestarting}, {S::kSubmitted, S::kCancelled},
      {S::kGating, S::kRunning},       {S::kGating, S::kQueued},
      {S::kGating, S::kRestarting},    {S::kGating, S::kCancelled},
      {S::kRunning, S::kSucceeded},    {S::kRunning, S::kRestarting},
      {S::kRunning, S::kCancelled},    {S::kRestarting, S::kGating},
      {S::kRestarting, S::kQueued},    {S::kRestarting, S::kFailed},
      {S::kRestarting, S::kCancelled},
      // Slurm requeued the job: pending again.
      {S::kGating, S::kSubmitted},     {S::kRunning, S::kSubmitted},
      {S::kRestarting, S::kSubmitted},
      // The gate found a path of the spec out of bounds (checked again at GO).
      {S::kGating, S::kFailed},
  };
  int checked = 0;
  for (const auto& from : AllRunStates()) {
    for (const auto& to : AllRunStates()) {
      bool ok = CheckTransition(from.state, to.state).ok();
      EXPECT_EQ(ok, allowed.count({from.state, to.state}) == 1)
          << from.name << " -> " << to.name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 64);
}

TEST(RunStateTest, TerminalStatesHaveNoExit) {
  for (S s : {S::kSucceeded, S::kFailed, S::kCancelled}) {
    EXPECT_TRUE(IsTerminal(s));
    EXPECT_TRUE(Info(s).next.empty());
  }
  EXPECT_FALSE(IsTerminal(S::kRunning));
}

TEST(RunStateTest, NamesRoundTrip) {
  for (const auto& info : AllRunStates()) EXPECT_EQ(ParseRunState(info.name), info.state);
  EXPECT_FALSE(ParseRunState("running").has_value());
  EXPECT_NE(CheckTransition(S::kSucceeded, S::kRunning).message().find("SUCCEEDED -> RUNNING"),
            std::string::npos);
}

}  // namespace
}  // namespace trellis::controller
