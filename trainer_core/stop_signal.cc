#include "trainer_core/stop_signal.h"

#include <signal.h>

#include <csignal>

namespace trellis::train {
namespace {

volatile std::sig_atomic_t g_stop = 0;
extern "C" void OnStopSignal(int) { g_stop = 1; }

}  // namespace

void InstallStopSignal() {
  struct sigaction on {};
  on.sa_handler = OnStopSignal;
  on.sa_flags = SA_RESTART;  // a collective in flight goes on; the flag is read after the step
  sigemptyset(&on.sa_mask);
  sigaction(SIGUSR1, &on, nullptr);
}

bool StopSignalled() { return g_stop != 0; }

}  // namespace trellis::train
