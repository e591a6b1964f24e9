// `trellis-worker check`: `trellis doctor`'s look at one compute node
// (docs/architecture.md, "Doctor"). Runs each probe and prints its line as
// JSON on stdout as soon as it is known, so that an srun cut short still
// returns the lines before it; logs go to stderr. The verdicts and sentences
// are worker/core/node_checks'.
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include "common/check_line.h"
#include "common/log.h"
#include "common/tls.h"
#include "common/version.h"
#include "worker/app/agent.h"
#include "worker/core/certify_checks.h"
#include "worker/core/memory_probe.h"
#include "worker/core/node_checks.h"
#include "worker/io/node_info.h"
#include "worker/io/sysfs_probe.h"
#include "worker/io/tcp_probe.h"
#include "worker/io/touch_probe.h"
#include "common/controller_address.h"
#include "worker/rpc/controller_link.h"

namespace trellis::worker {
namespace {

// After the channel did not come up: how long a bare TCP connect may take.
constexpr std::chrono::milliseconds kCheckTcpLimit{2000};

PathAccess AccessCheckedPath(const std::string& path) {
  PathAccess a{path, 0, ""};
  auto failed = [&a] {
    a.error = errno;
    a.error_text = std::strerror(a.error);
    return a;
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return failed();
  if (S_ISDIR(st.st_mode)) {
    // Ranks and the worker enter the run directory and list checkpoints.
    if (::access(path.c_str(), X_OK) != 0) return failed();
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) return failed();
    errno = 0;
    const bool listed = ::readdir(dir) != nullptr || errno == 0;
    const int list_errno = errno;
    ::closedir(dir);
    errno = list_errno;
    return listed ? a : failed();
  }
  // O_NONBLOCK: a FIFO must not hang the check.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return failed();
  // One byte: a stale network mount can open and still fail to read.
  char byte;
  const bool read = !S_ISREG(st.st_mode) || ::read(fd, &byte, 1) >= 0;
  const int read_errno = errno;
  ::close(fd);
  errno = read_errno;
  return read ? a : failed();
}

ControllerDial DialForCheck(const CheckArgs& args, Clock& clock) {
  ControllerDial dial;
  dial.address = dial.flag_address = args.controller;
  dial.controller_file = args.controller_file;
  dial.tls_ca = args.tls_ca;
  auto credentials = tls::ChannelCredentials("--tls-ca", args.tls_ca);
  if (!credentials.ok()) {
    dial.credentials_error = std::string(credentials.status().message());
    return dial;
  }
  // As the agent dials: the file's address wins when it is readable.
  ControllerLink link(args.controller, args.controller_file, *credentials);
  const SteadyTime start = clock.SteadyNow();
  dial.connected = link.WaitConnected(kControllerCheckWait);
  dial.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock.SteadyNow() - start);
  dial.address = link.address();
  if (!dial.connected) {
    absl::Status tcp = TcpConnect(dial.address, kCheckTcpLimit);
    dial.accepts_tcp = tcp.ok();
    if (!tcp.ok()) spdlog::info("{}", std::string(tcp.message()));
  }
  return dial;
}

GpuFacts ProbeGpusForCheck(int expected) {
  GpuFacts g;
  g.visible = CountGpus();
  g.expected = expected;
  if (g.visible == 0) return g;
  g.nccl_tried = true;
  // RTLD_NOW: a library whose own dependencies are missing fails here, not in a rank.
  void* nccl = ::dlopen(kNcclLibrary, RTLD_NOW | RTLD_LOCAL);
  if (nccl == nullptr) {
    const char* why = ::dlerror();
    g.nccl_error = why != nullptr ? why : "unknown error";
  } else {
    ::dlclose(nccl);
  }
  return g;
}

// --certify's own lines, before anything starts threads (the touch probe forks).
std::vector<CheckLine> CertifyLines(const CheckArgs& args, const absl::StatusOr<NodeProbe>& probe) {
  std::vector<CheckLine> out;
  const auto asked = static_cast<int64_t>(args.touch_gib * double{1 << 30});
  if (probe.ok() && asked > 0) {
    TouchProbeLimits limits;
    limits.max_bytes = asked;
    limits.budget = std::chrono::seconds(60);
    for (const SocketProbe& s : probe->sockets) {
      auto touched = TouchProbe(s.numa_node, limits);
      absl::StatusOr<TouchFacts> facts =
          touched.ok() ? absl::StatusOr<TouchFacts>(TouchFacts{s.numa_node, asked,
                                                               touched->obtainable_bytes,
                                                               touched->stopped_by})
                       : absl::StatusOr<TouchFacts>(touched.status());
      out.push_back(TouchCheck(s.numa_node, facts));
    }
  }
  out.push_back(ComputeCheck(ComputeKnownAnswer(2000000)));
  // A compute and collective check on the node's GPUs needs a torch-linked
  // program (trellis-rank's trainer); none is built into the worker, so a
  // GPU node is certified by the gpus line (count, NCCL loads) unless the
  // site gives its own GPU test as the controller's certify-command.
  if (CountGpus() > 0)
    out.push_back({"gpu compute", CheckLine::Verdict::kSkip,
                   "no GPU compute or collective check built in: set the controller's "
                   "certify-command to the site's GPU test"});
  return out;
}

}  // namespace

int RunCheck(const CheckArgs& args, Clock& clock) {
  std::vector<CheckLine> lines;
  auto emit = [&lines](CheckLine line) {
    std::cout << CheckLineJson(line) << std::endl;
    lines.push_back(std::move(line));
  };
  emit(WorkerCheck(kVersion, SelfExecutable(), Hostname()));
  const std::string root =
      ResolveSysfsRoot(args.sysfs_root, std::getenv("TRELLIS_SYSFS_ROOT"), DefaultNodeName());
  const absl::StatusOr<NodeProbe> probe = ProbeNode(root);
  std::vector<CheckLine> certify;
  if (args.certify) certify = CertifyLines(args, probe);
  for (const std::string& path : args.paths) emit(PathCheck(AccessCheckedPath(path)));
  CheckArgs dialled = args;
  if (dialled.controller.empty() && !dialled.controller_file.empty()) {
    auto named = ReadControllerAddress(dialled.controller_file);
    if (named.ok()) dialled.controller = named->address;
  }
  if (dialled.controller.empty())
    emit({"controller", CheckLine::Verdict::kSkip,
          "no controller serves yet: whether this node reaches it is checked once one does"});
  else
    emit(ControllerCheck(DialForCheck(dialled, clock)));
  emit(NumaCheck(probe, root + "/devices/system/node"));
  emit(GpuCheck(ProbeGpusForCheck(args.expect_gpus)));
  for (CheckLine& line : certify) emit(std::move(line));
  if (args.certify) std::cout << CertifySummary(lines) << std::endl;
  return AnyFailed(lines) ? kExitError : kExitOk;
}

}  // namespace trellis::worker
