#pragma once
// Time as an injected dependency: pure decisions take `now`; the shells ask a
// Clock, and tests use FakeClock.

#include <chrono>
#include <cstdint>
#include <mutex>

namespace trellis {

using WallTime = std::chrono::system_clock::time_point;
using SteadyTime = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual WallTime Now() const = 0;
  virtual SteadyTime SteadyNow() const = 0;
};

class SystemClock : public Clock {
 public:
  WallTime Now() const override { return std::chrono::system_clock::now(); }
  SteadyTime SteadyNow() const override { return std::chrono::steady_clock::now(); }
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
  void Advance(std::chrono::nanoseconds d) {
    std::lock_guard<std::mutex> l(mu_);
    wall_ += std::chrono::duration_cast<WallTime::duration>(d);
    steady_ += d;
  }

 private:
  mutable std::mutex mu_;
  WallTime wall_;
  SteadyTime steady_{};
};

inline int64_t ToUnixMillis(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
inline WallTime FromUnixMillis(int64_t ms) { return WallTime(std::chrono::milliseconds(ms)); }

}  // namespace trellis
