#pragma once
// For tests of real threads and processes: polls until `done()` holds or
// `limit` passes in real time (a deadline, never a fixed sleep), returning
// whether it held. Logic on a clock advances a FakeClock instead.

#include <chrono>
#include <functional>
#include <thread>

namespace trellis {

inline bool Eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // bounded by the deadline
  }
  return true;
}

}  // namespace trellis
