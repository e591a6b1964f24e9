#include "common/clock.h"

namespace trellis {

TimerId TimerQueue::Add(SteadyTime due, std::function<void()> fn) {
  std::lock_guard<std::mutex> l(mu_);
  TimerId id = next_id_++;
  due_.emplace(due, std::make_pair(id, std::move(fn)));
  changed_.notify_all();
  return id;
}

void TimerQueue::Cancel(TimerId id) {
  std::unique_lock<std::mutex> l(mu_);
  for (auto it = due_.begin(); it != due_.end(); ++it) {
    if (it->second.first == id) {
      due_.erase(it);
      changed_.notify_all();
      return;
    }
  }
  // Firing now: wait until it has returned (unless it cancels itself).
  if (firing_ == id) {
    if (std::this_thread::get_id() == firing_thread_) return;
    changed_.wait(l, [&] { return firing_ != id; });
  }
}

std::function<void()> TimerQueue::TakeDue(SteadyTime now) {
  std::lock_guard<std::mutex> l(mu_);
  if (due_.empty() || due_.begin()->first > now) return nullptr;
  auto node = due_.extract(due_.begin());
  firing_ = node.mapped().first;
  firing_thread_ = std::this_thread::get_id();
  return std::move(node.mapped().second);
}

void TimerQueue::Fired() {
  std::lock_guard<std::mutex> l(mu_);
  firing_ = 0;
  changed_.notify_all();
}

std::optional<SteadyTime> TimerQueue::NextDue() const {
  std::lock_guard<std::mutex> l(mu_);
  if (due_.empty()) return std::nullopt;
  return due_.begin()->first;
}

int TimerQueue::Size() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int>(due_.size());
}

std::function<void()> TimerQueue::WaitTake() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    if (stopping_) return nullptr;
    SteadyTime now = std::chrono::steady_clock::now();
    if (!due_.empty() && due_.begin()->first <= now) {
      auto node = due_.extract(due_.begin());
      firing_ = node.mapped().first;
      firing_thread_ = std::this_thread::get_id();
      return std::move(node.mapped().second);
    }
    // Woken by a new, cancelled or stopped timer, or when the earliest falls due.
    if (due_.empty())
      changed_.wait(l);
    else
      changed_.wait_until(l, due_.begin()->first);
  }
}

void TimerQueue::Stop() {
  std::lock_guard<std::mutex> l(mu_);
  stopping_ = true;
  changed_.notify_all();
}

SystemClock::~SystemClock() {
  timers_.Stop();
  if (thread_.joinable()) thread_.join();
}

TimerId SystemClock::ScheduleAfter(std::chrono::nanoseconds after, std::function<void()> fn) {
  std::call_once(started_, [this] {
    thread_ = std::thread([this] {
      while (auto fn = timers_.WaitTake()) {
        fn();
        timers_.Fired();
      }
    });
  });
  return timers_.Add(SteadyNow() + std::chrono::duration_cast<SteadyTime::duration>(after),
                     std::move(fn));
}

void SystemClock::Cancel(TimerId id) { timers_.Cancel(id); }

TimerId FakeClock::ScheduleAfter(std::chrono::nanoseconds after, std::function<void()> fn) {
  return timers_.Add(SteadyNow() + std::chrono::duration_cast<SteadyTime::duration>(after),
                     std::move(fn));
}

void FakeClock::Advance(std::chrono::nanoseconds d) {
  SteadyTime end;
  {
    std::lock_guard<std::mutex> l(mu_);
    end = steady_ + std::chrono::duration_cast<SteadyTime::duration>(d);
  }
  for (;;) {
    std::optional<SteadyTime> next = timers_.NextDue();
    if (!next || *next > end) break;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (*next > steady_) {
        wall_ += std::chrono::duration_cast<WallTime::duration>(*next - steady_);
        steady_ = *next;
      }
    }
    if (auto fn = timers_.TakeDue(*next)) {
      fn();
      timers_.Fired();
    }
  }
  std::lock_guard<std::mutex> l(mu_);
  wall_ += std::chrono::duration_cast<WallTime::duration>(end - steady_);
  steady_ = end;
}

int FakeClock::PendingTimers() const { return timers_.Size(); }

namespace {

// Waits on `cv` until `done` (every notify when null) or until a timer of
// `clock` due after `after` has fired.
void WaitWithTimer(Clock& clock, std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                   std::chrono::nanoseconds after, const std::function<bool()>* done) {
  bool due = false;  // guarded by lock's mutex
  std::mutex* mu = lock.mutex();
  // The callback needs the mutex, held here until the wait releases it: its
  // notify cannot come before the wait.
  TimerId id = clock.ScheduleAfter(after, [&] {
    std::lock_guard<std::mutex> l(*mu);
    due = true;
    cv.notify_all();
  });
  if (done != nullptr)
    cv.wait(lock, [&] { return due || (*done)(); });
  else
    cv.wait(lock);
  // Cancel waits for a callback in progress, which needs the mutex.
  lock.unlock();
  clock.Cancel(id);
  lock.lock();
}

}  // namespace

bool WaitFor(Clock& clock, std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
             std::chrono::nanoseconds after, const std::function<bool()>& done) {
  // A FakeClock fires nothing until advanced, not even a timer due now.
  if (done() || after <= std::chrono::nanoseconds::zero()) return done();
  WaitWithTimer(clock, lock, cv, after, &done);
  return done();
}

void WaitOnce(Clock& clock, std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
              std::chrono::nanoseconds after) {
  if (after <= std::chrono::nanoseconds::zero()) return;
  WaitWithTimer(clock, lock, cv, after, nullptr);
}

void SleepFor(Clock& clock, std::chrono::nanoseconds d) {
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu);
  WaitFor(clock, lock, cv, d, [] { return false; });
}

}  // namespace trellis
