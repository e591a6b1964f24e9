#pragma once
// Takes the moments of every collective of a communicator and its subgroups
// over a window (a training step), for comm_times.h to count: when the
// caller issued it, when it ended, when the caller's work reached its wait.
// On a GPU these are CUDA events: issue and wait on the compute stream, the
// end on a stream of the group's own that waits for the collective and
// nothing else; read once at the window's end. On the CPU the host clock,
// the end stamped by the backend's thread as the collective completes.

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "trainer_core/compat_device_time.h"
#include "trainer_core/parallel/comm_times.h"

namespace trellis::train {

class CommClock {
 public:
  struct Span {
    int group = 0;
    compat::DeviceStamp issued, waited, done;
    // On the CPU: steady-clock nanoseconds of the end, from the backend's
    // thread (-1 until then).
    std::atomic<int64_t> done_ns{-1};
    void MarkDoneOnHost();
  };

  explicit CommClock(bool cuda);
  bool cuda() const { return cuda_; }
  int AddGroup();  // a new group's index
  compat::SideStream& stream(int group) { return *streams_[group]; }
  // A collective of `group` is being issued now.
  std::shared_ptr<Span> Issue(int group);
  void Reset();
  CommTimes Take();

 private:
  bool cuda_;
  std::vector<std::unique_ptr<compat::SideStream>> streams_;
  compat::DeviceStamp origin_;
  std::vector<std::shared_ptr<Span>> spans_;
};

}  // namespace trellis::train
