#pragma once
// Names a missing peer instead of hanging on it. A rank whose peer died (or
// was stopped, or lost its network) waits in its next collective until the
// backend gives up: gloo with a bare timeout, NCCL by aborting the process
// from its watchdog, neither naming the rank that is gone. So every member of
// a communicator beats a counter in the rendezvous store (every second at
// most) and watches the others'; a peer silent for half the collective
// timeout ends this rank with a message that names it, before the backend's
// own timeout. Where the backend itself reports an
// error (NCCL's socket transport sees a dead peer's sockets close, in
// PyTorch's watchdog thread, out of the rank's reach), the watch polls it
// and ends the rank at once, naming the peers that stopped beating since.
// The decisions (SilentPeers, PeersSilentSince) are pure; PeerWatch is the
// thread around them.

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

// The watched `peers` whose counters did not move from `at_error` to `now`
// and that did not leave: after the backend's error, the ones gone.
std::vector<int> PeersSilentSince(const std::vector<int>& peers,
                                  const std::vector<int64_t>& at_error,
                                  const std::vector<int64_t>& now, const std::vector<bool>& left);

// "rank 0 of 2: NCCL reports COMM_ERROR in group world; rank 1 stopped
// beating ..." (the message a rank ends with after its backend's error).
std::string BackendErrorMessage(int me, int world, const std::string& error,
                                const std::vector<int>& silent, std::chrono::milliseconds waited);

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
  std::chrono::milliseconds period{1000}, threshold{60000};  // beat and read; silence
  std::string store_address;  // for messages: host:port
  // The backend's own word, polled every `error_poll`: "" while healthy,
  // else what it reports ("COMM_ERROR in group world"). Then the peers are
  // read for `confirm` (a live one beats within it) and the rank ends.
  std::function<std::string()> backend_error;
  std::chrono::milliseconds error_poll{100}, confirm{2500};
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

  // The period and silence threshold for a collective timeout: a tenth of
  // it, at most a second; half the timeout of silence, so that the watch
  // speaks before the backend. (Not less: under a worker, the controller's
  // hang timeout, learned and often seconds, finds a stopped rank first and
  // blames its node; peers giving up earlier would end the launch as their
  // own exits, the stopped rank unblamed.)
  static PeerWatchOptions ForTimeout(int rank, int world, std::chrono::milliseconds timeout,
                                     std::string store_address);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trellis::train
