#pragma once
// Time as an injected dependency: pure decisions take `now`; the shells ask a
// Clock, and tests use FakeClock. Timers live on the clock too, so that a
// test drives timeouts and backoffs by advancing fake time, in no real time.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace trellis {

using WallTime = std::chrono::system_clock::time_point;
using SteadyTime = std::chrono::steady_clock::time_point;
using TimerId = uint64_t;

// A duration as the seconds a metric or a log line shows.
inline double SecondsOf(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

class Clock {
 public:
  virtual ~Clock() = default;
  virtual WallTime Now() const = 0;
  virtual SteadyTime SteadyNow() const = 0;
  // Calls `fn` once, `after` from now on the steady clock, on a thread of the
  // clock's own (callers post to their loop). Never calls it inline.
  virtual TimerId ScheduleAfter(std::chrono::nanoseconds after, std::function<void()> fn) = 0;
  // The timer will not fire; returns once a call of it in progress has ended.
  virtual void Cancel(TimerId id) = 0;
};

// Timers due at a steady time, fired in order (SystemClock and FakeClock).
class TimerQueue {
 public:
  TimerId Add(SteadyTime due, std::function<void()> fn);
  void Cancel(TimerId id);
  // Removes and returns the earliest timer due at or before `now`, if any;
  // it then counts as firing until Fired().
  std::function<void()> TakeDue(SteadyTime now);
  void Fired();
  std::optional<SteadyTime> NextDue() const;
  int Size() const;
  // Real time: blocks until a timer is due and takes it (as TakeDue), or
  // returns nullptr once Stop() was called.
  std::function<void()> WaitTake();
  void Stop();

 private:
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::multimap<SteadyTime, std::pair<TimerId, std::function<void()>>> due_;
  TimerId next_id_ = 1;
  TimerId firing_ = 0;
  std::thread::id firing_thread_;
  bool stopping_ = false;
};

class SystemClock : public Clock {
 public:
  SystemClock() = default;
  ~SystemClock() override;
  WallTime Now() const override { return std::chrono::system_clock::now(); }
  SteadyTime SteadyNow() const override { return std::chrono::steady_clock::now(); }
  // The first call starts the clock's timer thread.
  TimerId ScheduleAfter(std::chrono::nanoseconds after, std::function<void()> fn) override;
  void Cancel(TimerId id) override;

 private:
  TimerQueue timers_;
  std::once_flag started_;
  std::thread thread_;
};

class FakeClock : public Clock {
 public:
  explicit FakeClock(WallTime start = WallTime(std::chrono::hours(24 * 365 * 56)))
      : wall_(start) {}
  WallTime Now() const override {
    std::lock_guard<std::mutex> l(mu_);
    return wall_;
  }
  SteadyTime SteadyNow() const override {
    std::lock_guard<std::mutex> l(mu_);
    return steady_;
  }
  TimerId ScheduleAfter(std::chrono::nanoseconds after, std::function<void()> fn) override;
  void Cancel(TimerId id) override { timers_.Cancel(id); }
  // Moves time forward, firing the timers that fall due on the way, in order,
  // on the calling thread, each with the clock showing its due time.
  void Advance(std::chrono::nanoseconds d);
  int PendingTimers() const;

 private:
  mutable std::mutex mu_;
  WallTime wall_;
  SteadyTime steady_{};
  TimerQueue timers_;
};

// Waits on `cv`, whose mutex `lock` holds, until `done()` holds or `after` has
// passed on `clock` (a FakeClock's Advance ends the wait); returns done(),
// with the lock held again. For threads that are no event loop: the step
// stream's batching and backoff, the controller client's retries.
bool WaitFor(Clock& clock, std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
             std::chrono::nanoseconds after, const std::function<bool()>& done);

// Waits on `cv`, whose mutex `lock` holds, once: until a notify (or a
// spurious wake-up), or until `after` has passed on `clock`; the caller
// checks its own condition again, as after condition_variable::wait_until.
void WaitOnce(Clock& clock, std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
              std::chrono::nanoseconds after);

// Blocks the calling thread for `d` on `clock`.
void SleepFor(Clock& clock, std::chrono::nanoseconds d);

inline int64_t ToUnixMillis(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
inline WallTime FromUnixMillis(int64_t ms) { return WallTime(std::chrono::milliseconds(ms)); }

}  // namespace trellis
