// Which state changes are which events, whose hooks hear them, and what they send.
#include "controller/core/notify.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace trellis::controller {
namespace {

using S = RunState;

TEST(NotifyTest, EventsOfAStateChange) {
  EXPECT_EQ(EventsOf(S::kRunning, S::kSucceeded, "all 4 ranks exited 0"),
            std::vector<std::string>{"end"});
  EXPECT_EQ(EventsOf(S::kRestarting, S::kFailed, "3 of 3 restarts used"),
            (std::vector<std::string>{"end", "failure"}));
  EXPECT_EQ(EventsOf(S::kRunning, S::kRestarting, "rank 1 exited with 3; relaunch 1 of 3"),
            std::vector<std::string>{"restart"});
  EXPECT_TRUE(EventsOf(S::kRunning, S::kRestarting, "reached the Slurm time limit; new attempt")
                  .empty())
      << "a time limit's continuation is no failure";
  EXPECT_EQ(EventsOf(S::kRunning, S::kRestarting, "stopped for the next attempt; new attempt"),
            std::vector<std::string>{"handoff"});
  EXPECT_TRUE(EventsOf(S::kQueued, S::kSubmitted, "attempt 1 is Slurm job 7").empty());
  EXPECT_TRUE(EventsOf(S::kSubmitted, S::kSubmitted, "Slurm keeps job 7 pending").empty());
}

TEST(NotifyTest, TheRunsOwnHooksOrTheControllersWantTheirEvents) {
  spec::NotifySection defaults;
  defaults.command = "logger trellis";
  spec::NotifySection run;
  EXPECT_EQ(NotifyFor(run, defaults).command, "logger trellis");
  run.webhook = "https://hooks.example.org/t";
  run.on = {"failure"};
  const spec::NotifySection to = NotifyFor(run, defaults);
  EXPECT_TRUE(to.command.empty()) << "the run's section replaces the defaults";
  EXPECT_TRUE(Wants(to, "failure"));
  EXPECT_FALSE(Wants(to, "end"));
  EXPECT_FALSE(Wants(spec::NotifySection{}, "end")) << "no hook";
  EXPECT_TRUE(Wants(defaults, "quarantine"));
}

TEST(NotifyTest, TheJsonAndTheWebhooksCommandLine) {
  Notification n{"failure", "hello-3", "FAILED", "rank 1 said \"no\"", "", 1700000000000};
  const auto j = nlohmann::json::parse(NotificationJson(n));
  EXPECT_EQ(j["event"], "failure");
  EXPECT_EQ(j["reason"], "rank 1 said \"no\"");
  EXPECT_EQ(j["show"], "trellis show hello-3");
  const auto argv = WebhookArgv("https://h.example.org/x", "{}");
  EXPECT_EQ(argv.front(), "curl");
  EXPECT_EQ(argv.back(), "https://h.example.org/x");
  EXPECT_EQ(argv[argv.size() - 2], "--") << "a URL is never taken for an option";
}

}  // namespace
}  // namespace trellis::controller
