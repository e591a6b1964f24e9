#include "common/loop_timer.h"

namespace trellis {

void LoopTimer::Arm(std::chrono::nanoseconds after, std::function<void()> fn) {
  Cancel();
  const uint64_t armed_as = ++*generation_;
  id_ = clock_.ScheduleAfter(after, [this, post = post_, generation = generation_, armed_as,
                                     fn = std::move(fn)]() mutable {
    // On the clock's thread: only hand over. `this` is touched on the loop,
    // and only while the generation says the timer is alive and this arming current.
    post([this, generation, armed_as, fn = std::move(fn)] {
      if (*generation != armed_as) return;
      id_ = 0;
      fn();
    });
  });
}

void LoopTimer::Cancel() {
  ++*generation_;
  if (id_ == 0) return;
  clock_.Cancel(id_);
  id_ = 0;
}

}  // namespace trellis
