#include "trainer_core/parallel/peer_watch.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

namespace trellis::train {

std::vector<int> SilentPeers(std::vector<PeerSighting>* seen, const std::vector<int64_t>& beats,
                             const std::vector<bool>& left, bool reachable, int me,
                             SteadyTime now, std::chrono::milliseconds threshold) {
  std::vector<int> silent;
  for (size_t r = 0; r < seen->size(); ++r) {
    PeerSighting& p = (*seen)[r];
    if (static_cast<int>(r) == me) continue;
    if (reachable) {
      if (left[r]) p.left = true;
      if (beats[r] != p.beats) {
        p.beats = beats[r];
        p.changed = now;
      }
    }
    if (!p.left && now - p.changed >= threshold) silent.push_back(static_cast<int>(r));
  }
  return silent;
}

std::vector<int> WatchedPeers(int me, int world) {
  std::vector<int> peers;
  if (world <= 16) {
    for (int r = 0; r < world; ++r)
      if (r != me) peers.push_back(r);
    return peers;
  }
  for (int k = 1; k <= 8; ++k) peers.push_back((me + k) % world);
  return peers;
}

std::string MissingPeerMessage(int me, int world, const std::vector<int>& silent,
                               std::chrono::milliseconds silence, const std::string& store,
                               bool store_lost) {
  std::string who;
  for (size_t i = 0; i < silent.size(); ++i)
    who += (i == 0 ? "" : i + 1 == silent.size() ? " and " : ", ") + std::to_string(silent[i]);
  char took[32];
  std::snprintf(took, sizeof(took), "%.1fs", silence.count() / 1000.0);
  std::string msg = "comm: rank " + std::to_string(me) + " of " + std::to_string(world) + ": " +
                    (silent.size() == 1 ? "rank " : "ranks ") + who +
                    (silent.size() == 1 ? " has" : " have") + " not been heard from for " + took;
  if (store_lost)
    msg += " (the rendezvous store at " + store +
           ", served by rank 0, stopped answering: rank 0 is gone or unreachable)";
  else
    msg += " (the process ended, was stopped, or cannot reach the store at " + store + ")";
  return msg + "; giving up rather than waiting on a collective that cannot complete";
}

PeerWatchOptions PeerWatch::ForTimeout(int rank, int world, std::chrono::milliseconds timeout,
                                       std::string store_address) {
  using std::chrono::milliseconds;
  PeerWatchOptions o;
  o.rank = rank;
  o.world = world;
  o.period = std::clamp(timeout / 10, milliseconds(100), milliseconds(5000));
  o.threshold = std::max(timeout / 2, 2 * o.period);
  o.store_address = std::move(store_address);
  return o;
}

struct PeerWatch::Impl {
  std::unique_ptr<PeerStore> store;
  PeerWatchOptions options;
  OnMissing on_missing;
  std::mutex mu;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;

  void Loop() {
    const int world = options.world, me = options.rank;
    std::vector<PeerSighting> seen(world);
    for (auto& p : seen) {
      p.changed = std::chrono::steady_clock::now();
      p.left = true;  // unwatched peers are never reported
    }
    const std::vector<int> peers = WatchedPeers(me, world);
    for (int r : peers) seen[r].left = false;
    auto store_answered = std::chrono::steady_clock::now();
    std::vector<int64_t> beats(world, -1);
    std::vector<bool> left(world, false);
    bool store_lost = false;
    std::unique_lock<std::mutex> lock(mu);
    while (!wake.wait_for(lock, options.period, [&] { return stop; })) {
      lock.unlock();
      bool reachable = true;
      try {
        store->Beat(me);
        store->Read(peers, &beats, &left);
      } catch (const std::exception&) {
        reachable = false;  // rank 0 serves the store: silence from it
      }
      store_lost = !reachable;
      const auto now = std::chrono::steady_clock::now();
      if (reachable) store_answered = now;
      auto silent = SilentPeers(&seen, beats, left, reachable, me, now, options.threshold);
      if (!reachable) {
        // Nobody can be read; what is known is that rank 0, which serves the
        // store, is gone (unless it said it left).
        silent.clear();
        if (me != 0 && !left[0] && now - store_answered >= options.threshold)
          silent.push_back(0);
      }
      lock.lock();
      if (stop) break;
      if (silent.empty()) continue;
      auto silence = std::chrono::duration_cast<std::chrono::milliseconds>(
          now - (store_lost ? store_answered : seen[silent.front()].changed));
      on_missing(MissingPeerMessage(me, world, silent, silence, options.store_address,
                                    store_lost));
      break;
    }
  }
};

PeerWatch::PeerWatch(std::unique_ptr<PeerStore> store, PeerWatchOptions options,
                     OnMissing on_missing)
    : impl_(std::make_unique<Impl>()) {
  impl_->store = std::move(store);
  impl_->options = std::move(options);
  impl_->on_missing = on_missing ? std::move(on_missing) : [](const std::string& message) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  };
  impl_->thread = std::thread([this] { impl_->Loop(); });
}

PeerWatch::~PeerWatch() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  impl_->thread.join();
  // An exception on its way out means this rank failed: let the peers see it
  // fall silent rather than leave.
  if (std::uncaught_exceptions() > 0) return;
  try {
    impl_->store->Leave(impl_->options.rank);
  } catch (const std::exception&) {
    // The store (rank 0) is gone already: nobody is left to tell.
  }
}

}  // namespace trellis::train
