#pragma once
// Test helper: runs an io_context until a condition holds or a deadline passes.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>

namespace trellis::worker::testing {

inline bool RunUntil(boost::asio::io_context& io, const std::function<bool()>& done,
                     std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (io.stopped()) io.restart();
    io.run_one_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace trellis::worker::testing
