// ReadLogs over real gRPC: a follow waits on the controller's clock between
// reads, so a FakeClock decides when a line written since is sent.

#include <filesystem>
#include <fstream>
#include <functional>

#include "common/eventually_test_util.h"
#include "controller/app/controller_fixture.h"

namespace trellis::controller {
namespace {

using namespace std::chrono_literals;

class LogReactorTest : public ControllerTest {
 protected:
  // A run whose attempt 1, launch 1 has rank 0's log with `text`.
  std::string RunWithLog(const std::string& text) {
    v1::SubmitRunResponse resp;
    EXPECT_TRUE(Submit(kSpec, &resp).ok());
    log_ = fs::path(Get(resp.run_id()).run_dir()) / "attempt-1" / "launch-1" / "rank-0.log";
    fs::create_directories(log_.parent_path());
    Append(text);
    return resp.run_id();
  }
  void Append(const std::string& text) {
    std::ofstream out(log_, std::ios::app);
    out << text;
  }

  fs::path log_;
};

TEST_F(LogReactorTest, AFollowReadsWhatWasWrittenOnceTheClockPassesItsPoll) {
  const std::string id = RunWithLog("first\n");
  const int timers_before = clock_.PendingTimers();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));  // no hang
  v1::ReadLogsRequest req;
  req.set_run_id(id);
  req.set_attempt(1);
  req.set_rank(-1);
  req.set_follow(true);
  auto reader = user_stub_->ReadLogs(&ctx, req);
  v1::LogChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  EXPECT_EQ(chunk.data(), "[rank 0] first\n");

  // Nothing new: the follow waits for its poll, a timer of the clock.
  ASSERT_TRUE(Eventually([&] { return clock_.PendingTimers() == timers_before + 1; }));
  Append("second\n");
  // The clock moves on until the poll has run: the timer counted above may
  // have been another's, the reactor's armed just after (a test once waited
  // forever on one Advance that came before its timer).
  std::atomic<bool> read_done{false};
  bool read_ok = false;
  std::thread read([&] {
    read_ok = reader->Read(&chunk);
    read_done = true;
  });
  for (int i = 0; i < 200 && !read_done; ++i) {
    clock_.Advance(300ms);
    std::this_thread::sleep_for(10ms);
  }
  read.join();
  ASSERT_TRUE(read_ok);
  EXPECT_EQ(chunk.rank(), 0);
  EXPECT_EQ(chunk.data(), "[rank 0] second\n");

  ctx.TryCancel();
  while (reader->Read(&chunk)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The reactor is gone and its timer with it.
  EXPECT_TRUE(Eventually([&] { return clock_.PendingTimers() == timers_before; }));
}

}  // namespace
}  // namespace trellis::controller
