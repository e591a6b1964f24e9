#include "worker/io/rank_channel.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "worker/io/socket_dir.h"
#include "worker/testing/run_until.h"

namespace trellis::worker {
namespace {

using testing::RunUntil;

std::string Line(int64_t step) {
  StepRecord r;
  r.step = step;
  r.loss = 2.5;
  r.tokens = 4096;
  r.step_seconds = 0.25;
  return EncodeStepRecord(r) + "\n";
}

// A rank's end of the channel: a plain blocking unix socket.
class Client {
 public:
  explicit Client(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
        << std::strerror(errno);
  }
  ~Client() { Close(); }
  void Write(const std::string& data) {
    ASSERT_EQ(::write(fd_, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

class RankChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = SocketDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
    channel_ = std::make_unique<RankChannel>(
        io_, clock_, [this](int rank, const StepRecord& r) { got_.push_back({rank, r.step}); });
  }
  void TearDown() override {
    channel_.reset();
    dir_.reset();
  }
  std::string Listen(int rank) {
    std::string path = dir_->path() + "/rank-" + std::to_string(rank) + ".sock";
    EXPECT_TRUE(channel_->Listen(rank, path).ok());
    return path;
  }
  bool WaitRecords(size_t n) {
    return RunUntil(io_, [&] { return got_.size() >= n; });
  }

  boost::asio::io_context io_;
  FakeClock clock_;
  std::unique_ptr<SocketDir> dir_;
  std::unique_ptr<RankChannel> channel_;
  std::vector<std::pair<int, int64_t>> got_;  // rank, step
};

TEST_F(RankChannelTest, GoodLinesCarryTheSocketsRank) {
  Client c(Listen(5));
  c.Write(Line(1) + Line(2));
  c.Write(Line(3));
  ASSERT_TRUE(WaitRecords(3));
  EXPECT_EQ(got_, (std::vector<std::pair<int, int64_t>>{{5, 1}, {5, 2}, {5, 3}}));
  EXPECT_EQ(channel_->stats().bad_lines, 0u);
}

TEST_F(RankChannelTest, BadLinesAreCountedAndSkipped) {
  Client c(Listen(0));
  c.Write("not json\n");
  c.Write("{\"v\": 2, \"step\": 1, \"loss\": 1, \"tokens\": 1, \"step_seconds\": 1}\n");
  c.Write("{\"v\": 1, \"step\": \"x\"}\n");
  c.Write(Line(7));
  ASSERT_TRUE(WaitRecords(1));
  EXPECT_EQ(got_, (std::vector<std::pair<int, int64_t>>{{0, 7}}));
  EXPECT_EQ(channel_->stats().bad_lines, 3u);
  EXPECT_EQ(channel_->stats().oversized_lines, 0u);
}

TEST_F(RankChannelTest, OversizedLineIsDiscardedUpToItsNewline) {
  Client c(Listen(1));
  c.Write(std::string(kMaxStepRecordBytes * 5, 'x'));
  c.Write(std::string(100, '{') + "\n" + Line(8));
  ASSERT_TRUE(WaitRecords(1));
  EXPECT_EQ(got_, (std::vector<std::pair<int, int64_t>>{{1, 8}}));
  EXPECT_EQ(channel_->stats().oversized_lines, 1u);
  EXPECT_EQ(channel_->stats().bad_lines, 1u);
}

TEST_F(RankChannelTest, PartialWritesAreJoined) {
  Client c(Listen(2));
  std::string line = Line(4);
  c.Write(line.substr(0, 10));
  io_.poll();
  c.Write(line.substr(10, 10));
  io_.poll();
  EXPECT_TRUE(got_.empty());
  c.Write(line.substr(20) + Line(5).substr(0, 3));
  ASSERT_TRUE(WaitRecords(1));
  c.Write(Line(5).substr(3));
  ASSERT_TRUE(WaitRecords(2));
  EXPECT_EQ(got_, (std::vector<std::pair<int, int64_t>>{{2, 4}, {2, 5}}));
}

TEST_F(RankChannelTest, TwoRanksAtOnce) {
  Client a(Listen(0));
  Client b(Listen(1));
  for (int i = 0; i < 20; ++i) {
    a.Write(Line(i));
    b.Write(Line(100 + i));
  }
  ASSERT_TRUE(WaitRecords(40));
  for (const auto& [rank, step] : got_) EXPECT_EQ(rank, step >= 100 ? 1 : 0);
  EXPECT_EQ(channel_->stats(0).records, 20u);
  EXPECT_EQ(channel_->stats(1).records, 20u);
}

TEST_F(RankChannelTest, ReconnectsAreAccepted) {
  std::string path = Listen(3);
  {
    Client c(path);
    c.Write(Line(1));
    ASSERT_TRUE(WaitRecords(1));
  }
  Client again(path);
  again.Write(Line(2));
  ASSERT_TRUE(WaitRecords(2));
  EXPECT_EQ(channel_->stats(3).connections, 2u);
}

TEST_F(RankChannelTest, DrainReadsWhatExitedRanksLeftBehind) {
  std::string path = Listen(4);
  {
    // Connected, wrote and gone before the loop ever ran: still in the backlog.
    Client c(path);
    c.Write(Line(1) + Line(2) + "{\"v\":1,\"step\":3");  // the last line is unterminated
  }
  bool drained = false;
  channel_->Drain(std::chrono::seconds(5), [&] { drained = true; });
  ASSERT_TRUE(RunUntil(io_, [&] { return drained; }));
  EXPECT_EQ(got_, (std::vector<std::pair<int, int64_t>>{{4, 1}, {4, 2}}));
  EXPECT_EQ(channel_->stats(4).bad_lines, 1u);
}

TEST_F(RankChannelTest, DrainGivesUpOnAConnectionLeftOpen) {
  Client c(Listen(6));
  c.Write(Line(1));
  ASSERT_TRUE(WaitRecords(1));
  bool drained = false;
  channel_->Drain(std::chrono::seconds(2), [&] { drained = true; });
  clock_.Advance(std::chrono::milliseconds(1999));
  io_.poll();
  EXPECT_FALSE(drained);  // the bound is not over, the connection still open
  clock_.Advance(std::chrono::milliseconds(1));
  ASSERT_TRUE(RunUntil(io_, [&] { return drained; }));
  EXPECT_EQ(channel_->open_connections(), 1);
}

}  // namespace
}  // namespace trellis::worker
