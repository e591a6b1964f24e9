#include "trainer_core/parallel/peer_watch.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
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

std::vector<int> PeersSilentSince(const std::vector<int>& peers,
                                  const std::vector<int64_t>& at_error,
                                  const std::vector<int64_t>& now, const std::vector<bool>& left) {
  std::vector<int> silent;
  for (int r : peers)
    if (!left[r] && now[r] == at_error[r]) silent.push_back(r);
  return silent;
}

namespace {
std::string RankList(const std::vector<int>& ranks) {
  std::string who;
  for (size_t i = 0; i < ranks.size(); ++i)
    who += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  return who;
}
}  // namespace

std::string BackendErrorMessage(int me, int world, const std::string& error,
                                const std::vector<int>& silent, std::chrono::milliseconds waited) {
  char took[32];
  std::snprintf(took, sizeof(took), "%.1fs", waited.count() / 1000.0);
  std::string msg = "comm: rank " + std::to_string(me) + " of " + std::to_string(world) +
                    ": NCCL reports " + error + "; ";
  if (silent.empty())
    msg += std::string("every peer still beats ") + took +
           " later, so the fault is the network's or NCCL's";
  else
    msg += (silent.size() == 1 ? "rank " : "ranks ") + RankList(silent) +
           (silent.size() == 1 ? " has" : " have") + " not beaten since (" + took +
           "): the process ended, was stopped, or lost its network";
  return msg + "; giving up at once rather than waiting on collectives that cannot complete";
}

std::string MissingPeerMessage(int me, int world, const std::vector<int>& silent,
                               std::chrono::milliseconds silence, const std::string& store,
                               bool store_lost) {
  const std::string who = RankList(silent);
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
  o.period = std::clamp(timeout / 10, milliseconds(100), milliseconds(1000));
  o.threshold = std::max(timeout / 2, 3 * o.period);
  o.confirm = 2 * o.period + milliseconds(500);
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

  // Beats and reads the watched peers; false when the store did not answer.
  bool Poll(const std::vector<int>& peers, std::vector<int64_t>* beats, std::vector<bool>* left) {
    try {
      store->Beat(options.rank);
      store->Read(peers, beats, left);
      return true;
    } catch (const std::exception&) {
      return false;  // rank 0 serves the store: silence from it
    }
  }

  void Loop() {
    using Clock = std::chrono::steady_clock;
    const int world = options.world, me = options.rank;
    std::vector<PeerSighting> seen(world);
    for (auto& p : seen) {
      p.changed = Clock::now();
      p.left = true;  // unwatched peers are never reported
    }
    const std::vector<int> peers = WatchedPeers(me, world);
    for (int r : peers) seen[r].left = false;
    auto store_answered = Clock::now();
    std::vector<int64_t> beats(world, -1);
    std::vector<bool> left(world, false);
    // The backend's error, once reported: when, what, and the counters then.
    std::optional<SteadyTime> error_at;
    std::string error;
    std::vector<int64_t> at_error;
    const auto tick =
        options.backend_error ? std::min(options.error_poll, options.period) : options.period;
    auto next_poll = Clock::now() + options.period;
    std::unique_lock<std::mutex> lock(mu);
    while (!wake.wait_for(lock, tick, [&] { return stop; })) {
      lock.unlock();
      if (!error_at && options.backend_error) {
        error = options.backend_error();
        if (!error.empty()) error_at = Clock::now();
      }
      const bool due = error_at || Clock::now() >= next_poll;
      std::string message;
      if (due) {
        next_poll = Clock::now() + options.period;
        const bool reachable = Poll(peers, &beats, &left);
        const auto now = Clock::now();
        if (reachable) store_answered = now;
        if (error_at)
          message = AfterBackendError(peers, beats, left, reachable, *error_at, error, &at_error);
        else
          message = Silence(&seen, beats, left, reachable, store_answered);
      }
      lock.lock();
      if (stop) break;
      if (message.empty()) continue;
      on_missing(message);
      break;
    }
  }

  // After the backend's error: the message once the peers have had `confirm`
  // to beat (or all of them did), naming those that did not; "" until then.
  std::string AfterBackendError(const std::vector<int>& peers, const std::vector<int64_t>& beats,
                                const std::vector<bool>& left, bool reachable,
                                SteadyTime error_at, const std::string& error,
                                std::vector<int64_t>* at_error) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - error_at);
    if (reachable && at_error->empty()) {
      *at_error = beats;
      return "";
    }
    std::vector<int> silent;
    if (reachable) silent = PeersSilentSince(peers, *at_error, beats, left);
    const bool all_beat = reachable && silent.empty();
    if (!all_beat && waited < options.confirm) return "";
    if (!reachable && options.rank != 0 && !left[0]) silent = {0};  // the store's server
    return BackendErrorMessage(options.rank, options.world, error, silent, waited);
  }

  // Without a backend error: peers silent for the threshold, if any.
  std::string Silence(std::vector<PeerSighting>* seen, const std::vector<int64_t>& beats,
                      const std::vector<bool>& left, bool reachable, SteadyTime store_answered) {
    const auto now = std::chrono::steady_clock::now();
    const int me = options.rank;
    auto silent = SilentPeers(seen, beats, left, reachable, me, now, options.threshold);
    if (!reachable) {
      // Nobody can be read; what is known is that rank 0, which serves the
      // store, is gone (unless it said it left).
      silent.clear();
      if (me != 0 && !left[0] && now - store_answered >= options.threshold) silent.push_back(0);
    }
    if (silent.empty()) return "";
    auto silence = std::chrono::duration_cast<std::chrono::milliseconds>(
        now - (reachable ? (*seen)[silent.front()].changed : store_answered));
    return MissingPeerMessage(me, options.world, silent, silence, options.store_address,
                              !reachable);
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
