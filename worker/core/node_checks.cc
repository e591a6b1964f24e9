#include "worker/core/node_checks.h"

#include <cerrno>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "worker/core/memory_probe.h"

namespace trellis::worker {
namespace {

using Verdict = CheckLine::Verdict;

CheckLine NodeCheckLine(std::string name, Verdict verdict, std::string detail) {
  return CheckLine{std::move(name), verdict, std::move(detail)};
}

// The address, and where it came from when the file moved it off --controller.
std::string DialedAddress(const ControllerDial& d) {
  if (d.controller_file.empty() || d.address == d.flag_address) return d.address;
  return absl::StrCat(d.address, " (named by ", d.controller_file, ")");
}

}  // namespace

CheckLine WorkerCheck(absl::string_view version, absl::string_view executable,
                      absl::string_view hostname) {
  return NodeCheckLine(
      "worker", Verdict::kOk,
      absl::StrCat("trellis-worker ", version, " at ", executable, " on ", hostname));
}

CheckLine PathCheck(const PathAccess& a) {
  std::string name = "path " + a.path;
  if (a.error == 0) return NodeCheckLine(std::move(name), Verdict::kOk, "readable");
  // Present but forbidden: mounting it elsewhere would not help.
  if (a.error == EACCES || a.error == EPERM)
    return NodeCheckLine(
        std::move(name), Verdict::kFail,
        absl::StrCat(a.path, " is not readable from this node (", a.error_text,
                     "); give the user the jobs run as read access to it and search "
                     "(x) access to every directory above it"));
  return NodeCheckLine(
      std::move(name), Verdict::kFail,
      absl::StrCat(a.path, " is not visible from this node (", a.error_text,
                   "); put it on a filesystem the compute nodes mount at the same path"));
}

CheckLine ControllerCheck(const ControllerDial& d) {
  const std::string address = DialedAddress(d);
  if (!d.credentials_error.empty())
    return NodeCheckLine(
        "controller", Verdict::kFail,
        absl::StrCat(d.credentials_error,
                     "; the CA file must be on a filesystem the compute nodes mount at "
                     "the same path"));
  if (d.connected)
    return NodeCheckLine("controller", Verdict::kOk,
                         absl::StrCat("reached ", address, " in ", d.elapsed.count(), " ms"));
  const double wait = kControllerCheckWait.count();
  if (d.accepts_tcp && !d.tls_ca.empty())
    return NodeCheckLine(
        "controller", Verdict::kFail,
        absl::StrCat(address,
                     " accepts TCP connections but no TLS connection verified "
                     "against the CA ",
                     d.tls_ca, " came up within ", wait,
                     " s; the controller must serve TLS with a certificate signed by "
                     "that CA that names the host the compute nodes dial"));
  if (d.accepts_tcp)
    return NodeCheckLine("controller", Verdict::kFail,
                         absl::StrCat(address,
                                      " accepts TCP connections but no plain-text gRPC "
                                      "connection came up within ",
                                      wait,
                                      " s; if the controller serves TLS the check needs its CA "
                                      "(--tls-ca), else another program holds the port"));
  return NodeCheckLine(
      "controller", Verdict::kFail,
      absl::StrCat("cannot reach ", address, " from this node within ", wait,
                   " s; the controller must listen on an address the compute nodes "
                   "reach (listen = \"0.0.0.0:PORT\" with TLS, or advertise = a name "
                   "they resolve)"));
}

CheckLine NumaCheck(const absl::StatusOr<NodeProbe>& probe, absl::string_view node_dir) {
  if (!probe.ok())
    return NodeCheckLine("numa", Verdict::kFail,
                         absl::StrCat("cannot read ", node_dir, ": ", probe.status().message(),
                                      "; the launch gate needs sysfs NUMA (", node_dir,
                                      "/nodeN/meminfo) readable by users"));
  int64_t free_bytes = 0, total_bytes = 0;
  for (const SocketProbe& s : probe->sockets) {
    free_bytes += s.free_bytes;
    total_bytes += s.total_bytes;
  }
  return NodeCheckLine("numa", Verdict::kOk,
                       absl::StrCat(probe->sockets.size(), " socket(s), ", FormatGib(free_bytes),
                                    " GiB free of ", FormatGib(total_bytes), " GiB"));
}

CheckLine GpuCheck(const GpuFacts& g) {
  const bool nccl_failed = g.nccl_tried && !g.nccl_error.empty();
  if (g.expected > 0 && g.visible < g.expected) {
    std::string detail = absl::StrCat(
        g.expected, " expected (the partition's GRES), ", g.visible,
        " visible (/dev/nvidiaN); check the driver on this node (nvidia-smi) or correct the "
        "node's Gres in slurm.conf");
    // Both at once, so that one round of fixes is enough.
    if (nccl_failed)
      absl::StrAppend(&detail, ", and make ", kNcclLibrary, " loadable (", g.nccl_error, ")");
    return NodeCheckLine("gpus", Verdict::kFail, std::move(detail));
  }
  if (g.visible == 0) return NodeCheckLine("gpus", Verdict::kSkip, "no GPUs on this node");
  const std::string count =
      g.expected > 0 ? absl::StrCat(g.visible, " GPU(s) visible (", g.expected, " expected)")
                     : absl::StrCat(g.visible, " GPU(s) visible");
  // A warning: a trellis-rank built against a PyTorch that carries its own
  // NCCL finds it through its RPATH, where this process does not look.
  if (nccl_failed)
    return NodeCheckLine(
        "gpus", Verdict::kWarn,
        absl::StrCat(count, " but ", kNcclLibrary, " does not load here (", g.nccl_error,
                     "); ranks need NCCL: install it or load the site's module in the "
                     "batch script's environment, unless trellis-rank carries its own (a "
                     "PyTorch's)"));
  if (!g.nccl_tried) return NodeCheckLine("gpus", Verdict::kOk, count);
  return NodeCheckLine("gpus", Verdict::kOk, absl::StrCat(count, ", ", kNcclLibrary, " loads"));
}

}  // namespace trellis::worker
