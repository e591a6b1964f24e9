#pragma once
// One block of host memory of exactly the size asked: every page written
// from the CPU first (so the rank's NUMA policy places it, not a device
// copy's first touch: on a GH200 node, the socket the gate checked), and
// page-locked for a GPU's copies where asked. LibTorch's pinned allocator
// rounds large blocks up to a power of two (a 6.2 GiB request takes 8).

#include <cstdint>
#include <memory>
#include <string>

namespace trellis::train {

class HostArena {
 public:
  // Throws TrainError naming `purpose` and `remedy` when the memory cannot
  // be had or locked.
  static std::unique_ptr<HostArena> Allocate(int64_t bytes, bool page_lock,
                                             const std::string& purpose,
                                             const std::string& remedy);
  ~HostArena();
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  char* base() const { return static_cast<char*>(base_); }
  int64_t bytes() const { return bytes_; }

  static constexpr int64_t kPage = 4096;
  // What an arena asked for `bytes` holds: whole pages.
  static int64_t Rounded(int64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

 private:
  HostArena() = default;
  void* base_ = nullptr;
  int64_t bytes_ = 0;
  bool locked_ = false;
};

}  // namespace trellis::train
