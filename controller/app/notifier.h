#pragma once
// Sends notifications (controller/core/notify.h) on a thread of its own, so
// that a slow webhook or command never holds the controller's loop: a webhook
// is POSTed with curl (10 s a try, 3 retries), a command is run by /bin/sh -c
// with the event in its environment (TRELLIS_EVENT, TRELLIS_RUN_ID,
// TRELLIS_STATE, TRELLIS_REASON, TRELLIS_NODE, TRELLIS_NOTIFICATION: the
// JSON), at most 30 s. Failures are logged, never retried beyond that.

#include <boost/asio/thread_pool.hpp>

#include "common/spec/run_spec.h"
#include "controller/core/notify.h"

namespace trellis::controller {

class Notifier {
 public:
  Notifier() = default;
  ~Notifier() { pool_.join(); }  // what was sent is delivered (or times out) first

  // Sends `n` to the webhook and the command of `to` that want its event.
  void Send(const spec::NotifySection& to, Notification n);

 private:
  boost::asio::thread_pool pool_{1};
};

}  // namespace trellis::controller
