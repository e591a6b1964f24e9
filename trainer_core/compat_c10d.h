#pragma once
// compat.h's part for c10d, the process groups: only the translation units
// that talk to them include it (parallel/comm.cc), as its headers are large.

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#include <chrono>
#include <stdexcept>
#include <string>

#include "trainer_core/torch_api.h"

namespace trellis::train::compat {

// What a process group implementation derives from: 2.x splits the user-facing
// ProcessGroup from its per-device Backends; 1.13 has ProcessGroup only.
#if TORCH_VERSION_MAJOR >= 2
using Backend = c10d::Backend;
#else
using Backend = c10d::ProcessGroup;
#endif

// A backend's own failure as LibTorch throws it: NCCL's error codes
// (ncclRemoteError where a peer is gone) are DistBackendError from 2.1 on,
// apart from a bad argument's plain c10::Error. 1.13 tells them apart by
// no type, so there nothing is caught as one (it has no NCCL here anyway).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
using BackendError = c10::DistBackendError;
#else
class BackendError : public c10::Error {  // never thrown
  using c10::Error::Error;
};
#endif

// NCCL exists only where LibTorch was built with CUDA (CMake defines
// USE_C10D_NCCL then); elsewhere asking for it is a clear error.
inline c10::intrusive_ptr<Backend> MakeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int size,
                                                 std::chrono::milliseconds timeout) {
#ifdef USE_C10D_NCCL
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#else
  (void)store, (void)rank, (void)size, (void)timeout;
  throw std::runtime_error("this LibTorch has no NCCL (built without CUDA)");
#endif
}

// What the group's backend reports of itself: "" while healthy, else its
// error ("COMM_ERROR": NCCL saw a peer's sockets close, or its network
// fail). ProcessGroupNCCL says so from LibTorch 2.8 on (getError, set by its
// watchdog thread); elsewhere nothing is known: "". Any thread may ask.
inline std::string BackendErrorOf(Backend* group) {
#if defined(USE_C10D_NCCL) && \
    (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 8))
  auto* nccl = dynamic_cast<c10d::ProcessGroupNCCL*>(group);
  if (nccl == nullptr) return "";
  // By number: the enumerators' names have moved between releases.
  static const char* const kNames[] = {"", "TIMEOUT", "COMM_ERROR", "REMOTE_ERROR"};
  const int e = static_cast<int>(nccl->getError());
  if (e == 0) return "";
  return e > 0 && e < 4 ? kNames[e] : "error " + std::to_string(e);
#else
  (void)group;
  return "";
#endif
}

}  // namespace trellis::train::compat
