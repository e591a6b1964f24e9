#pragma once
// `trellis-worker check` (docs/architecture.md, "Doctor"): what `trellis
// doctor` learns about one compute node, one CheckLine per check. Pure: the
// shell (worker/app/check.cc) runs the probes and hands their results here,
// where each becomes a verdict and one sentence; a failure's sentence says
// what is wrong and what to do, since the admin reads it on the login node.

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/check_line.h"
#include "common/node_probe.h"
#include "worker/core/args.h"

namespace trellis::worker {

// How long the check waits for the controller's channel to connect.
inline constexpr Seconds kControllerCheckWait{5};
// The library the ranks' collectives need, as the dynamic loader names it.
inline constexpr char kNcclLibrary[] = "libnccl.so.2";

// "worker": which binary answered, from where, on which host.
CheckLine WorkerCheck(absl::string_view version, absl::string_view executable,
                      absl::string_view hostname);

// One --path as this node sees it: error 0 when it could be read (a
// directory entered and listed, a file opened and read).
struct PathAccess {
  std::string path;
  int error = 0;           // errno of the first step that failed
  std::string error_text;  // strerror of it
};
// "path <P>".
CheckLine PathCheck(const PathAccess& access);

// The dial of the controller, as the shell saw it.
struct ControllerDial {
  std::string address;          // dialed: --controller, or what --controller-file named
  std::string flag_address;     // --controller
  std::string controller_file;  // empty: none given
  std::string tls_ca;           // empty: plain TCP
  // --tls-ca could not be read into credentials: nothing was dialed.
  std::string credentials_error;
  bool connected = false;
  std::chrono::milliseconds elapsed{0};  // until connected
  // Unconnected: whether a plain TCP connection to `address` was accepted,
  // which tells a handshake that failed from an address nobody answers on.
  bool accepts_tcp = false;
};
// "controller".
CheckLine ControllerCheck(const ControllerDial& dial);

// "numa": the launch gate's memory probe; `node_dir` is <root>/devices/system/node.
CheckLine NumaCheck(const absl::StatusOr<NodeProbe>& probe, absl::string_view node_dir);

// The GPUs counted as Register counts them, and whether NCCL loads.
struct GpuFacts {
  int visible = 0;
  int expected = 0;  // --expect-gpus; 0: no expectation
  // Tried only with GPUs visible: empty when kNcclLibrary loaded, else the loader's error.
  bool nccl_tried = false;
  std::string nccl_error;
};
// "gpus": the count against the expectation and, with GPUs, NCCL.
CheckLine GpuCheck(const GpuFacts& gpus);

}  // namespace trellis::worker
