#pragma once
// Names a missing peer instead of hanging on it. A rank whose peer died (or
// was stopped, or lost its network) waits in its next collective until the
// backend gives up: gloo with a bare timeout, NCCL by aborting the process
// from its watchdog, neither naming the rank that is gone. So every member of
// a communicator beats a counter in the rendezvous store and watches the
// others'; a peer silent for half the collective timeout ends this rank with
// a message that names it, before the backend's own timeout.
// The decision (SilentPeers) is pure; PeerWatch is the thread around it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace trellis::train {

using SteadyTime = std::chrono::steady_clock::time_point;

// What this rank last saw of one peer.
struct PeerSighting {
  int64_t beats = -1;     // the peer's counter; -1 before the first read
  SteadyTime changed{};   // when the counter last moved (or the watch began)
  bool left = false;      // the peer left the communicator cleanly
};

// Updates `seen` with this poll's counters (`left[r]`: peer r said it left)
// and returns the peers silent for `threshold` or more, in rank order.
// `reachable` false means the store did not answer: nothing moved.
std::vector<int> SilentPeers(std::vector<PeerSighting>* seen, const std::vector<int64_t>& beats,
                             const std::vector<bool>& left, bool reachable, int me,
                             SteadyTime now, std::chrono::milliseconds threshold);

// The peers a rank watches: all of them in a small world; beyond 16 ranks
// the 8 that follow it in a ring (each rank is watched by 8 others), so the
// store, served by rank 0, answers O(world) reads per period, not O(world^2).
std::vector<int> WatchedPeers(int me, int world);

// "rank 0 of 2: rank 1 has not been heard from for 5.2s ..." (the message a
// rank ends with).
std::string MissingPeerMessage(int me, int world, const std::vector<int>& silent,
                               std::chrono::milliseconds silence, const std::string& store,
                               bool store_lost);

// The watch's store access: beat my counter, read every counter and "left"
// flag. Throws when the store cannot be reached.
class PeerStore {
 public:
  virtual ~PeerStore() = default;
  virtual void Beat(int me) = 0;
  // Fills beats[r] and left[r] for r in `peers` (the vectors span the world).
  virtual void Read(const std::vector<int>& peers, std::vector<int64_t>* beats,
                    std::vector<bool>* left) = 0;
  virtual void Leave(int me) = 0;
};

struct PeerWatchOptions {
  int rank = 0, world = 1;
  std::chrono::milliseconds period{1000}, threshold{60000};
  std::string store_address;  // for messages: host:port
};

// Polls every `period` on its own thread; on a silent peer calls `on_missing`
// (the default writes the message to stderr and ends the process with 1: the
// main thread is stuck in a collective that cannot complete). The destructor
// stops the thread and, unless an exception is unwinding the stack, tells the
// peers this rank left cleanly.
class PeerWatch {
 public:
  using OnMissing = std::function<void(const std::string& message)>;
  PeerWatch(std::unique_ptr<PeerStore> store, PeerWatchOptions options,
            OnMissing on_missing = nullptr);
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // The poll period and silence threshold for a collective timeout: half the
  // timeout of silence (so the watch speaks first), polled ten times as often.
  static PeerWatchOptions ForTimeout(int rank, int world, std::chrono::milliseconds timeout,
                                     std::string store_address);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trellis::train
