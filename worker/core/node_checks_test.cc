#include "worker/core/node_checks.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace trellis::worker {
namespace {

using V = CheckLine::Verdict;
using namespace std::chrono_literals;

TEST(NodeChecksTest, Worker) {
  CheckLine l = WorkerCheck("0.9.1", "/opt/trellis/bin/trellis-worker", "node7");
  EXPECT_EQ(l.name, "worker");
  EXPECT_EQ(l.verdict, V::kOk);
  EXPECT_EQ(l.detail, "trellis-worker 0.9.1 at /opt/trellis/bin/trellis-worker on node7");
}

TEST(NodeChecksTest, Path) {
  CheckLine ok = PathCheck({"/srv/out", 0, ""});
  EXPECT_EQ(ok.name, "path /srv/out");
  EXPECT_EQ(ok.verdict, V::kOk);
  EXPECT_EQ(ok.detail, "readable");

  CheckLine missing = PathCheck({"/home/alice/out", ENOENT, "No such file or directory"});
  EXPECT_EQ(missing.verdict, V::kFail);
  EXPECT_EQ(missing.detail,
            "/home/alice/out is not visible from this node (No such file or directory); put it "
            "on a filesystem the compute nodes mount at the same path");
  EXPECT_EQ(PathCheck({"/nfs/out", ESTALE, "Stale file handle"}).verdict, V::kFail);

  // There, but not for this user: a mount would not help.
  CheckLine denied = PathCheck({"/srv/out", EACCES, "Permission denied"});
  EXPECT_EQ(denied.verdict, V::kFail);
  EXPECT_EQ(denied.detail.rfind("/srv/out is not readable from this node (Permission denied); "
                                "give the user the jobs run as read access",
                                0),
            0u)
      << denied.detail;
}

ControllerDial Dial() {
  ControllerDial d;
  d.address = d.flag_address = "login1:7000";
  return d;
}

TEST(NodeChecksTest, ControllerReached) {
  ControllerDial d = Dial();
  d.connected = true;
  d.elapsed = 12ms;
  CheckLine l = ControllerCheck(d);
  EXPECT_EQ(l.name, "controller");
  EXPECT_EQ(l.verdict, V::kOk);
  EXPECT_EQ(l.detail, "reached login1:7000 in 12 ms");
  // The file moved it: say so, the admin typed the other address.
  d.controller_file = "/srv/state/controller.address";
  d.address = "login2:7000";
  EXPECT_EQ(ControllerCheck(d).detail,
            "reached login2:7000 (named by /srv/state/controller.address) in 12 ms");
}

TEST(NodeChecksTest, ControllerUnreachable) {
  ControllerDial d = Dial();
  CheckLine l = ControllerCheck(d);
  EXPECT_EQ(l.verdict, V::kFail);
  EXPECT_EQ(l.detail,
            "cannot reach login1:7000 from this node within 5 s; the controller must listen on "
            "an address the compute nodes reach (listen = \"0.0.0.0:PORT\" with TLS, or "
            "advertise = a name they resolve)");
  d.tls_ca = "/srv/out/ca.pem";  // nothing answers: the same advice
  EXPECT_EQ(ControllerCheck(d).detail, l.detail);
}

TEST(NodeChecksTest, ControllerAnswersButNoChannel) {
  ControllerDial d = Dial();
  d.accepts_tcp = true;
  d.tls_ca = "/srv/out/ca.pem";
  CheckLine tls = ControllerCheck(d);
  EXPECT_EQ(tls.verdict, V::kFail);
  EXPECT_EQ(tls.detail,
            "login1:7000 accepts TCP connections but no TLS connection verified against the CA "
            "/srv/out/ca.pem came up within 5 s; the controller must serve TLS with a "
            "certificate signed by that CA that names the host the compute nodes dial");
  d.tls_ca.clear();
  CheckLine plain = ControllerCheck(d);
  EXPECT_EQ(plain.verdict, V::kFail);
  EXPECT_NE(plain.detail.find("no plain-text gRPC connection came up within 5 s; if the "
                              "controller serves TLS the check needs its CA (--tls-ca)"),
            std::string::npos)
      << plain.detail;
}

TEST(NodeChecksTest, ControllerCaUnreadable) {
  ControllerDial d = Dial();
  d.tls_ca = "/home/alice/ca.pem";
  d.credentials_error = "--tls-ca: cannot read /home/alice/ca.pem";
  CheckLine l = ControllerCheck(d);
  EXPECT_EQ(l.verdict, V::kFail);
  EXPECT_EQ(l.detail,
            "--tls-ca: cannot read /home/alice/ca.pem; the CA file must be on a filesystem the "
            "compute nodes mount at the same path");
}

TEST(NodeChecksTest, Numa) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  NodeProbe probe;
  probe.sockets.resize(2);
  probe.sockets[0].total_bytes = 120 * kGiB;
  probe.sockets[0].free_bytes = 100 * kGiB;
  probe.sockets[1].total_bytes = 120 * kGiB;
  probe.sockets[1].free_bytes = 72 * kGiB + kGiB / 2;
  probe.device_nodes.push_back({4, 96 * kGiB, 95 * kGiB});  // HBM: not host memory
  CheckLine ok = NumaCheck(probe, "/sys/devices/system/node");
  EXPECT_EQ(ok.name, "numa");
  EXPECT_EQ(ok.verdict, V::kOk);
  EXPECT_EQ(ok.detail, "2 socket(s), 172.5 GiB free of 240.0 GiB");

  CheckLine failed =
      NumaCheck(absl::PermissionDeniedError("cannot read /sys/devices/system/node/node0/meminfo: "
                                            "Permission denied"),
                "/sys/devices/system/node");
  EXPECT_EQ(failed.verdict, V::kFail);
  EXPECT_EQ(failed.detail,
            "cannot read /sys/devices/system/node: cannot read "
            "/sys/devices/system/node/node0/meminfo: Permission denied; the launch gate needs "
            "sysfs NUMA (/sys/devices/system/node/nodeN/meminfo) readable by users");
}

struct GpuCase {
  const char* what;
  GpuFacts facts;
  V verdict;
  std::string detail;
};

TEST(NodeChecksTest, Gpus) {
  const std::string no_nccl = "libnccl.so.2: cannot open shared object file";
  const GpuCase cases[] = {
      {"none, none expected", {0, 0, false, ""}, V::kSkip, "no GPUs on this node"},
      {"as expected",
       {4, 4, true, ""},
       V::kOk,
       "4 GPU(s) visible (4 expected), libnccl.so.2 loads"},
      {"no expectation", {8, 0, true, ""}, V::kOk, "8 GPU(s) visible, libnccl.so.2 loads"},
      {"fewer",
       {2, 4, true, ""},
       V::kFail,
       "4 expected (the partition's GRES), 2 visible (/dev/nvidiaN); check the driver on this "
       "node (nvidia-smi) or correct the node's Gres in slurm.conf"},
      {"none of those expected",
       {0, 4, false, ""},
       V::kFail,
       "4 expected (the partition's GRES), 0 visible (/dev/nvidiaN); check the driver on this "
       "node (nvidia-smi) or correct the node's Gres in slurm.conf"},
      {"fewer and no NCCL",
       {2, 4, true, no_nccl},
       V::kFail,
       "4 expected (the partition's GRES), 2 visible (/dev/nvidiaN); check the driver on this "
       "node (nvidia-smi) or correct the node's Gres in slurm.conf, and make libnccl.so.2 "
       "loadable (" +
           no_nccl + ")"},
      {"no NCCL",
       {4, 0, true, no_nccl},
       V::kWarn,
       "4 GPU(s) visible but libnccl.so.2 does not load here (" + no_nccl +
           "); ranks need NCCL: install it or load the site's module in the batch script's "
           "environment, unless trellis-rank carries its own (a PyTorch's)"},
  };
  for (const GpuCase& c : cases) {
    CheckLine l = GpuCheck(c.facts);
    EXPECT_EQ(l.name, "gpus") << c.what;
    EXPECT_EQ(l.verdict, c.verdict) << c.what;
    EXPECT_EQ(l.detail, c.detail) << c.what;
  }
}

}  // namespace
}  // namespace trellis::worker
