// trellis watch ID [--json] [--reconnect-for SECONDS]

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/commands/commands.h"
#include "cli/exit_status.h"
#include "cli/format.h"
#include "cli/watch_tracker.h"
#include "common/clock.h"

namespace trellis::cli {

namespace {

using std::chrono::steady_clock;

struct WatchOptions {
  std::string run_id;
  bool json = false;
  double reconnect_for_s = 60;
};

// One WatchRun stream, from open to its final status; prints as it reads.
grpc::Status FollowOnce(ControllerClient& client, const std::string& run_id, WatchTracker& tracker,
                        bool* got_events) {
  v1::WatchRunRequest req;
  req.set_run_id(run_id);
  auto ctx = client.StreamContext();
  auto reader = client.stub().WatchRun(ctx.get(), req);
  v1::WatchRunEvent event;
  while (reader->Read(&event)) {
    *got_events = true;
    std::cout << tracker.OnEvent(event, ToUnixMillis(SystemClock().Now())) << std::flush;
  }
  return reader->Finish();
}

int RunWatch(const GlobalOptions& global, const WatchOptions& opt) {
  ControllerClient client(global);
  WatchTracker tracker(opt.json);
  const auto budget = std::chrono::duration_cast<steady_clock::duration>(
      std::chrono::duration<double>(opt.reconnect_for_s));
  steady_clock::time_point lost_at{};
  int retries = 0;
  while (true) {
    bool got_events = false;
    grpc::Status status = FollowOnce(client, opt.run_id, tracker, &got_events);
    if (status.ok() && IsTerminal(tracker.state())) return ExitCodeForFinalState(tracker.state());
    // A stream that ends short of a terminal state, or breaks because the
    // controller went away (restart), is followed again once the controller
    // is back. Anything else, or no snapshot at all yet, is the answer.
    bool lost = status.ok() || status.error_code() == grpc::StatusCode::UNAVAILABLE;
    if (!lost || !tracker.has_snapshot()) {
      if (status.ok()) {
        PrintError("the watch stream of " + opt.run_id + " ended without the run's state");
        return kExitRunFailed;
      }
      return client.Fail(status);
    }
    if (got_events || retries == 0) {
      lost_at = steady_clock::now();
      retries = 0;
      PrintError("lost the controller at " + client.addr() + " (" +
                 (status.ok() ? std::string("stream ended") : status.error_message()) +
                 "); reconnecting for up to " +
                 FormatDuration(
                     std::chrono::milliseconds(static_cast<int64_t>(opt.reconnect_for_s * 1000))));
    }
    auto deadline = lost_at + budget;
    std::this_thread::sleep_for(
        std::min<steady_clock::duration>(ReconnectDelay(retries++), budget));
    auto remaining = deadline - steady_clock::now();
    if (remaining <= steady_clock::duration::zero() ||
        !client.WaitForConnected(std::chrono::system_clock::now() + remaining)) {
      PrintError("cannot reach the controller at " + client.addr() + " after " +
                 FormatDuration(std::chrono::duration_cast<std::chrono::milliseconds>(budget)) +
                 "; giving up (the address comes from --addr or TRELLIS_ADDR)");
      return kExitUnreachable;
    }
  }
}

}  // namespace

void AddWatchCommand(CLI::App& app, const GlobalOptions& global, int* exit_code) {
  auto opt = std::make_shared<WatchOptions>();
  CLI::App* cmd =
      app.add_subcommand("watch",
                         "Follow a run: state changes and a live step table until it ends "
                         "(exit 0: SUCCEEDED, 1: FAILED or CANCELLED).\n"
                         "Example: trellis watch tiny-moe-3");
  cmd->add_option("ID", opt->run_id, "the run id")->required();
  cmd->add_flag("--json", opt->json, "one JSON object per event per line");
  cmd->add_option("--reconnect-for", opt->reconnect_for_s,
                  "seconds to keep reconnecting when the controller goes away (default 60)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([&global, exit_code, opt] { *exit_code = RunWatch(global, *opt); });
}

}  // namespace trellis::cli
