#pragma once
// compat.h's part for the moments of device work: a step's laps, a
// collective's stamps and the side stream that takes them. On a GPU they are
// CUDA events (LibTorch built with CUDA); on the CPU the host clock.

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "trainer_core/compat.h"

namespace trellis::train::compat {

// The laps of one step, read once at its end. On a GPU each Mark records an
// event on the current stream, so marking never waits for the device and the
// laps are device time between marks; Finish waits for the last one (the
// step's one host synchronization for timing). On the CPU marks read the
// host clock.
// On a GPU each Mark also takes the caching allocator's peaks since the mark
// before and resets them: the allocator counts on the host, in program order,
// so a lap's peak is the most its work held at once, whenever the device runs
// it. The step's peaks are then the largest of its laps' and of what
// DeviceMemory reads after the last mark.
class StepLaps {
 public:
  explicit StepLaps(const torch::Device& device)
      : cuda_(device.is_cuda()), start_(Clock::now()) {
    Mark();
  }
  void Mark() {
#ifdef TRELLIS_TORCH_CUDA
    if (cuda_) {
      if (!events_.empty()) {  // the first mark starts the first lap
        const auto memory = CudaMemory(torch::Device(torch::kCUDA));
        allocated_peaks_.push_back(memory->allocated_peak);
        reserved_peak_ = std::max(reserved_peak_, memory->reserved_peak);
      }
      ResetMemoryPeaks(torch::Device(torch::kCUDA));
      events_.push_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));
      events_.back()->record();
      return;
    }
#endif
    times_.push_back(Clock::now());
  }
  // Bytes allocated to tensors at the peak of each lap (GPU only; empty on
  // the CPU), and the largest reserved peak of any.
  const std::vector<int64_t>& allocated_peaks() const { return allocated_peaks_; }
  int64_t reserved_peak() const { return reserved_peak_; }
  // Seconds between consecutive marks (the first mark is the constructor's).
  std::vector<double> Finish() {
    std::vector<double> laps;
#ifdef TRELLIS_TORCH_CUDA
    if (cuda_) {
      events_.back()->synchronize();
      for (size_t i = 1; i < events_.size(); ++i)
        laps.push_back(events_[i - 1]->elapsed_time(*events_[i]) / 1000.0);
      end_ = Clock::now();
      return laps;
    }
#endif
    for (size_t i = 1; i < times_.size(); ++i)
      laps.push_back(std::chrono::duration<double>(times_[i] - times_[i - 1]).count());
    end_ = Clock::now();
    return laps;
  }
  // Host wall time from construction to Finish.
  double Total() const { return std::chrono::duration<double>(end_ - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  bool cuda_;
  Clock::time_point start_, end_;
  std::vector<Clock::time_point> times_;
  std::vector<int64_t> allocated_peaks_;
  int64_t reserved_peak_ = 0;
#ifdef TRELLIS_TORCH_CUDA
  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> events_;
#endif
};

// A moment of a step's work, for timing collectives: on a GPU a CUDA event
// recorded on the current stream (read once the step is done), on the CPU the
// host clock.
class DeviceStamp {
 public:
  using Clock = std::chrono::steady_clock;
  DeviceStamp() = default;  // not stamped
  static DeviceStamp Now(bool cuda) {
    DeviceStamp s;
#ifdef TRELLIS_TORCH_CUDA
    if (cuda) {
      s.event_ = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
      s.event_->record();
      s.stamped_ = true;
      return s;
    }
#endif
    (void)cuda;
    return At(Clock::now());
  }
  static DeviceStamp At(Clock::time_point t) {
    DeviceStamp s;
    s.host_ = t;
    s.stamped_ = true;
    return s;
  }
  bool stamped() const { return stamped_; }
  // Returns once the device has reached the stamp (at once on the CPU).
  void Wait() const {
#ifdef TRELLIS_TORCH_CUDA
    if (event_) event_->synchronize();
#endif
  }
  // Makes the current stream wait (on the device, the host goes on) until the
  // stamp is reached. Nothing on the CPU, where a stamp is in the past.
  void BlockCurrentStream() const {
#ifdef TRELLIS_TORCH_CUDA
    if (event_) event_->block(at::cuda::getCurrentCUDAStream());
#endif
  }
  // Seconds from `origin` (a stamp of the same kind) to this one; on a GPU it
  // waits until both events have happened.
  double SecondsSince(const DeviceStamp& origin) const {
#ifdef TRELLIS_TORCH_CUDA
    if (event_ && origin.event_) {
      event_->synchronize();
      origin.event_->synchronize();
      return origin.event_->elapsed_time(*event_) / 1000.0;
    }
#endif
    return std::chrono::duration<double>(host_ - origin.host_).count();
  }

 private:
  bool stamped_ = false;
  Clock::time_point host_;
#ifdef TRELLIS_TORCH_CUDA
  std::shared_ptr<at::cuda::CUDAEvent> event_;
#endif
};

// A CUDA stream of its own, to stamp when work on other streams ends: `wait`
// (a collective's Work::wait, which makes the current stream wait for it)
// runs with this stream current, then a stamp is recorded on it. Nothing
// else runs there, so the stamp is the moment the awaited work ended. On the
// CPU it runs `wait` and reads the clock.
class SideStream {
 public:
  explicit SideStream(bool cuda) {
#ifdef TRELLIS_TORCH_CUDA
    if (cuda) stream_.emplace(c10::cuda::getStreamFromPool());
#endif
    (void)cuda;
  }
  bool cuda() const {
#ifdef TRELLIS_TORCH_CUDA
    return stream_.has_value();
#else
    return false;
#endif
  }
  template <typename F>
  DeviceStamp StampAfter(F&& wait) {
#ifdef TRELLIS_TORCH_CUDA
    if (stream_) {
      c10::cuda::CUDAStreamGuard guard(*stream_);
      wait();
      return DeviceStamp::Now(true);
    }
#endif
    wait();
    return DeviceStamp::Now(false);
  }

 private:
#ifdef TRELLIS_TORCH_CUDA
  std::optional<c10::cuda::CUDAStream> stream_;
#endif
};

}  // namespace trellis::train::compat
