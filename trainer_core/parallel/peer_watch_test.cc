#include "trainer_core/parallel/peer_watch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace trellis::train {
namespace {

using namespace std::chrono_literals;
using Time = SteadyTime;

TEST(SilentPeersTest, APeerIsSilentOnlyAfterTheThresholdWithoutABeat) {
  const Time t0{};
  std::vector<PeerSighting> seen(3, PeerSighting{-1, t0, false});
  std::vector<bool> left(3, false);
  // First read: every counter moves from -1.
  EXPECT_TRUE(SilentPeers(&seen, {1, 1, 1}, left, true, 0, t0 + 1s, 5s).empty());
  // Rank 2 stops beating; rank 1 goes on.
  EXPECT_TRUE(SilentPeers(&seen, {2, 2, 1}, left, true, 0, t0 + 4s, 5s).empty());
  EXPECT_TRUE(SilentPeers(&seen, {3, 3, 1}, left, true, 0, t0 + 5900ms, 5s).empty());
  EXPECT_EQ(SilentPeers(&seen, {4, 4, 1}, left, true, 0, t0 + 6s, 5s), std::vector<int>{2});
}

TEST(SilentPeersTest, APeerThatLeftIsNeverSilentAndMyselfNeither) {
  const Time t0{};
  std::vector<PeerSighting> seen(3, PeerSighting{-1, t0, false});
  std::vector<bool> left{false, false, true};
  SilentPeers(&seen, {1, 1, 1}, left, true, 1, t0, 5s);
  // Rank 1 (me) never reads its own counter moving; rank 2 said it left.
  EXPECT_EQ(SilentPeers(&seen, {1, 1, 1}, left, true, 1, t0 + 10s, 5s), std::vector<int>{0});
}

TEST(SilentPeersTest, AnUnreachableStoreMovesNothing) {
  const Time t0{};
  std::vector<PeerSighting> seen(2, PeerSighting{-1, t0, false});
  std::vector<bool> left(2, false);
  SilentPeers(&seen, {7, 7}, left, true, 1, t0, 5s);
  // The stale counters are not read again as news.
  EXPECT_TRUE(SilentPeers(&seen, {8, 8}, left, false, 1, t0 + 4s, 5s).empty());
  EXPECT_EQ(SilentPeers(&seen, {8, 8}, left, false, 1, t0 + 5s, 5s), std::vector<int>{0});
}

TEST(WatchedPeersTest, AllInASmallWorldAndEightFollowersInALargeOne) {
  EXPECT_EQ(WatchedPeers(1, 3), (std::vector<int>{0, 2}));
  EXPECT_EQ(WatchedPeers(0, 1), std::vector<int>{});
  auto ring = WatchedPeers(1530, 1536);
  EXPECT_EQ(ring, (std::vector<int>{1531, 1532, 1533, 1534, 1535, 0, 1, 2}));
}

TEST(PeerWatchTest, OptionsFollowTheCollectiveTimeout) {
  auto o = PeerWatch::ForTimeout(0, 2, 120s, "h:1");
  EXPECT_EQ(o.period, 1s);
  EXPECT_EQ(o.threshold, 60s);
  EXPECT_EQ(o.confirm, 2500ms);
  o = PeerWatch::ForTimeout(0, 2, 12s, "h:1");
  EXPECT_EQ(o.threshold, 6s);
  o = PeerWatch::ForTimeout(0, 2, 500ms, "h:1");
  EXPECT_EQ(o.period, 100ms);
  EXPECT_EQ(o.threshold, 300ms);
}

TEST(PeersSilentSinceTest, ThoseWhoseCountersStoodStillAndDidNotLeave) {
  // World 4, rank 0 watching 1..3: 1 beat on, 2 stood still, 3 stood still but left.
  EXPECT_EQ(PeersSilentSince({1, 2, 3}, {0, 5, 7, 9}, {0, 6, 7, 9}, {false, false, false, true}),
            std::vector<int>{2});
  EXPECT_TRUE(PeersSilentSince({1, 2}, {0, 5, 7}, {0, 6, 8}, {false, false, false}).empty());
}

TEST(BackendErrorMessageTest, NamesTheErrorAndThePeersGone) {
  EXPECT_EQ(BackendErrorMessage(0, 2, "COMM_ERROR in group world", {1}, 1600ms),
            "comm: rank 0 of 2: NCCL reports COMM_ERROR in group world; rank 1 has not beaten "
            "since (1.6s): the process ended, was stopped, or lost its network; giving up at "
            "once rather than waiting on collectives that cannot complete");
  EXPECT_EQ(BackendErrorMessage(2, 4, "TIMEOUT in group ep", {}, 300ms),
            "comm: rank 2 of 4: NCCL reports TIMEOUT in group ep; every peer still beats 0.3s "
            "later, so the fault is the network's or NCCL's; giving up at once rather than "
            "waiting on collectives that cannot complete");
}

TEST(MissingPeerMessageTest, NamesTheRanksTheSilenceAndTheStore) {
  EXPECT_EQ(MissingPeerMessage(0, 4, {1, 3}, 5200ms, "10.0.0.1:29500", false),
            "comm: rank 0 of 4: ranks 1 and 3 have not been heard from for 5.2s (the process "
            "ended, was stopped, or cannot reach the store at 10.0.0.1:29500); giving up rather "
            "than waiting on a collective that cannot complete");
  EXPECT_NE(MissingPeerMessage(1, 2, {0}, 3s, "h:9", true)
                .find("rank 0 has not been heard from for 3.0s (the rendezvous store at h:9, "
                      "served by rank 0, stopped answering"),
            std::string::npos);
}

// A store shared by the watches of one test: rank r's counter moves while
// beating[r] holds.
class SharedStore {
 public:
  explicit SharedStore(int world) : beats_(world, 0), left_(world, false), beating_(world, true) {}
  std::mutex mu;
  std::vector<int64_t> beats_;
  std::vector<bool> left_, beating_;
  bool reachable = true;
};

class FakePeerStore final : public PeerStore {
 public:
  explicit FakePeerStore(SharedStore* s) : s_(s) {}
  void Beat(int me) override {
    std::lock_guard<std::mutex> l(s_->mu);
    if (!s_->reachable) throw std::runtime_error("connection refused");
    if (s_->beating_[me]) ++s_->beats_[me];
  }
  void Read(const std::vector<int>& peers, std::vector<int64_t>* beats,
            std::vector<bool>* left) override {
    std::lock_guard<std::mutex> l(s_->mu);
    for (int r : peers) {
      (*beats)[r] = s_->beats_[r];
      (*left)[r] = s_->left_[r];
    }
  }
  void Leave(int me) override {
    std::lock_guard<std::mutex> l(s_->mu);
    s_->left_[me] = true;
  }

 private:
  SharedStore* s_;
};

// Collects the watch's message; waits for it with a deadline.
struct Alarm {
  std::mutex mu;
  std::condition_variable cv;
  std::string message;
  PeerWatch::OnMissing Callback() {
    return [this](const std::string& m) {
      std::lock_guard<std::mutex> l(mu);
      message = m;
      cv.notify_all();
    };
  }
  std::string Wait(std::chrono::milliseconds deadline) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait_for(l, deadline, [&] { return !message.empty(); });
    return message;
  }
};

PeerWatchOptions Fast(int rank, int world) {
  PeerWatchOptions o;
  o.rank = rank;
  o.world = world;
  o.period = 10ms;
  o.threshold = 100ms;
  o.store_address = "127.0.0.1:1";
  return o;
}

TEST(PeerWatchTest, ARankThatStopsBeatingIsNamed) {
  SharedStore store(2);
  Alarm alarm;
  PeerWatch peer(std::make_unique<FakePeerStore>(&store), Fast(1, 2), [](const std::string&) {});
  PeerWatch watch(std::make_unique<FakePeerStore>(&store), Fast(0, 2), alarm.Callback());
  EXPECT_EQ(alarm.Wait(300ms), "") << "rank 1 is alive";
  {
    std::lock_guard<std::mutex> l(store.mu);
    store.beating_[1] = false;  // stopped (SIGSTOP) or gone
  }
  EXPECT_NE(alarm.Wait(10s).find("rank 0 of 2: rank 1 has not been heard from"), std::string::npos)
      << alarm.message;
}

TEST(PeerWatchTest, APeerThatLeftCleanlyIsNotReported) {
  SharedStore store(2);
  Alarm alarm;
  auto peer = std::make_unique<PeerWatch>(std::make_unique<FakePeerStore>(&store), Fast(1, 2),
                                          [](const std::string&) {});
  PeerWatch watch(std::make_unique<FakePeerStore>(&store), Fast(0, 2), alarm.Callback());
  peer.reset();  // rank 1 finished: it says so and stops beating
  EXPECT_EQ(alarm.Wait(400ms), "");
}

// The backend's error ends the rank within `confirm`, long before the
// silence threshold, naming the peer that stopped beating.
TEST(PeerWatchTest, ABackendErrorEndsTheRankAtOnceNamingThePeerGone) {
  SharedStore store(3);
  Alarm alarm;
  std::atomic<bool> failed{false};
  PeerWatchOptions o = Fast(0, 3);
  o.threshold = 60s;  // the silence alone would take a minute
  o.confirm = 300ms;
  o.error_poll = 5ms;
  o.backend_error = [&] { return failed ? std::string("COMM_ERROR in group world") : ""; };
  PeerWatch one(std::make_unique<FakePeerStore>(&store), Fast(1, 3), [](const std::string&) {});
  PeerWatch two(std::make_unique<FakePeerStore>(&store), Fast(2, 3), [](const std::string&) {});
  PeerWatch watch(std::make_unique<FakePeerStore>(&store), o, alarm.Callback());
  EXPECT_EQ(alarm.Wait(200ms), "") << "healthy";
  {
    std::lock_guard<std::mutex> l(store.mu);
    store.beating_[2] = false;  // killed: NCCL's sockets to it close
  }
  const auto t0 = std::chrono::steady_clock::now();
  failed = true;
  const std::string m = alarm.Wait(5s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_NE(m.find("rank 0 of 3: NCCL reports COMM_ERROR in group world; rank 2 has not beaten"),
            std::string::npos)
      << m;
}

TEST(PeerWatchTest, ABackendErrorWithEveryPeerBeatingEndsTheRankWithoutWaiting) {
  SharedStore store(2);
  Alarm alarm;
  PeerWatchOptions o = Fast(0, 2);
  o.confirm = 10s;  // not waited for: every peer beat
  o.backend_error = [] { return std::string("COMM_ERROR in group world"); };
  PeerWatch one(std::make_unique<FakePeerStore>(&store), Fast(1, 2), [](const std::string&) {});
  PeerWatch watch(std::make_unique<FakePeerStore>(&store), o, alarm.Callback());
  const std::string m = alarm.Wait(3s);
  EXPECT_NE(m.find("every peer still beats"), std::string::npos) << m;
}

TEST(PeerWatchTest, ALostStoreNamesRankZero) {
  SharedStore store(2);
  Alarm alarm;
  PeerWatch watch(std::make_unique<FakePeerStore>(&store), Fast(1, 2), alarm.Callback());
  {
    std::lock_guard<std::mutex> l(store.mu);
    store.reachable = false;
  }
  EXPECT_NE(alarm.Wait(10s).find("rank 1 of 2: rank 0 has not been heard from"),
            std::string::npos)
      << alarm.message;
}

}  // namespace
}  // namespace trellis::train
