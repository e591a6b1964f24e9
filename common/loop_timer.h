#pragma once
// A one-shot timer of a Clock whose callback runs on its owner's event loop
// (an asio io_context, say), so that a FakeClock drives the loop's timeouts.
// The clock fires on a thread of its own; the timer posts the callback to the
// loop, where a call already posted before a Cancel or a new Arm is dropped:
// the owner needs no check of its own.
//
// Arm, Cancel and the destructor run on the loop's thread, or while the loop
// is not running; `post` must stay usable until the timer is destroyed.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "common/clock.h"

namespace trellis {

class LoopTimer {
 public:
  // Runs a closure on the owner's loop, e.g. boost::asio::post(io, fn).
  using Post = std::function<void(std::function<void()>)>;

  LoopTimer(Clock& clock, Post post) : clock_(clock), post_(std::move(post)) {}
  ~LoopTimer() { Cancel(); }
  LoopTimer(const LoopTimer&) = delete;
  LoopTimer& operator=(const LoopTimer&) = delete;

  // `fn` runs on the loop once `after` has passed; replaces an armed timer.
  void Arm(std::chrono::nanoseconds after, std::function<void()> fn);
  void Cancel();
  bool armed() const { return id_ != 0; }

 private:
  Clock& clock_;
  Post post_;
  TimerId id_ = 0;
  // Bumped by every Arm and Cancel; a posted call runs only if it still
  // matches. Shared with the posted calls, which may outlive the timer.
  std::shared_ptr<uint64_t> generation_ = std::make_shared<uint64_t>(0);
};

}  // namespace trellis
