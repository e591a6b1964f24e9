// Every request field of both APIs out of bounds: INVALID_ARGUMENT, and the
// message starts with the field's name.
#include "controller/rpc/validate.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/failure_marker_names.h"

namespace trellis::controller {
namespace {

template <typename Req>
using Cases = std::vector<std::pair<std::string, std::function<void(Req*)>>>;

// `good` passes; each case breaks one field of a copy of it.
template <typename Req>
void ExpectEachRefused(const Req& good, const Cases<Req>& cases) {
  grpc::Status ok = Check(good);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  for (const auto& [field, breaks] : cases) {
    Req req = good;
    breaks(&req);
    grpc::Status st = Check(req);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field;
    EXPECT_EQ(st.error_message().rfind(field + ": ", 0), 0u)
        << "expected the message to start with '" << field << ": ', got: " << st.error_message();
  }
}

v1::WorkerIdentity GoodId() {
  v1::WorkerIdentity id;
  id.set_run_id("hello-1");
  id.set_attempt(1);
  id.set_launch(1);
  id.set_node("node1");
  id.set_secret(std::string(64, 'a'));
  return id;
}

// The same identity breakage for every agent request (`id` of each).
template <typename Req>
Cases<Req> IdentityCases() {
  return {
      {"id.run_id", [](Req* r) { r->mutable_id()->set_run_id(""); }},
      {"id.run_id", [](Req* r) { r->mutable_id()->set_run_id("../../etc"); }},
      {"id.run_id", [](Req* r) { r->mutable_id()->set_run_id(std::string(97, 'a')); }},
      {"id.attempt", [](Req* r) { r->mutable_id()->set_attempt(0); }},
      {"id.attempt", [](Req* r) { r->mutable_id()->set_attempt(kMaxAttempt + 1); }},
      {"id.launch", [](Req* r) { r->mutable_id()->set_launch(-1); }},
      {"id.launch", [](Req* r) { r->mutable_id()->set_launch(kMaxAttempt + 1); }},
      {"id.node", [](Req* r) { r->mutable_id()->set_node(""); }},
      {"id.node", [](Req* r) { r->mutable_id()->set_node("node1; rm -rf /"); }},
      {"id.node", [](Req* r) { r->mutable_id()->set_node(std::string(256, 'n')); }},
      {"id.secret", [](Req* r) { r->mutable_id()->set_secret(""); }},
      {"id.secret", [](Req* r) { r->mutable_id()->set_secret(std::string(257, 's')); }},
  };
}

template <typename Req>
Cases<Req> operator+(Cases<Req> a, const Cases<Req>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

v1::RankExit GoodExit() {
  v1::RankExit e;
  e.set_rank(3);
  e.set_exit_code(137);
  e.set_signal(9);
  e.add_markers("host_oom");
  e.set_evidence("Killed");
  return e;
}

TEST(ValidateTest, Register) {
  v1::RegisterRequest good;
  *good.mutable_id() = GoodId();
  good.set_version("1.0.0");
  good.set_hostname("node1.cluster");
  good.set_gpus(4);
  good.set_cpus(288);
  auto* s = good.mutable_probe()->add_sockets();
  s->set_cpulist("0-71,144-215");
  s->set_total_bytes(int64_t{120} << 30);
  s->set_unattributed_bytes(-4096);  // counters may overlap
  good.mutable_probe()->add_device_nodes()->set_numa_node(4);
  good.set_slurm_job_id("1234");
  good.set_slurm_step_id("0");
  using R = v1::RegisterRequest;
  ExpectEachRefused<R>(good, IdentityCases<R>() + Cases<R>{
      {"version", [](R* r) { r->set_version(""); }},
      {"version", [](R* r) { r->set_version(std::string(65, 'v')); }},
      {"version", [](R* r) { r->set_version("1.0\n"); }},
      {"hostname", [](R* r) { r->set_hostname(std::string(256, 'h')); }},
      {"hostname", [](R* r) { r->set_hostname("evil$(id)"); }},
      {"gpus", [](R* r) { r->set_gpus(-1); }},
      {"gpus", [](R* r) { r->set_gpus(1025); }},
      {"cpus", [](R* r) { r->set_cpus(-1); }},
      {"probe", [](R* r) {
         for (int i = 0; i < 1025; ++i) r->mutable_probe()->add_sockets();
       }},
      {"probe", [](R* r) {
         for (int i = 0; i < 1025; ++i) r->mutable_probe()->add_device_nodes();
       }},
      {"probe.sockets[0].numa_node", [](R* r) {
         r->mutable_probe()->mutable_sockets(0)->set_numa_node(-1);
       }},
      {"probe.sockets[0].cpulist", [](R* r) {
         r->mutable_probe()->mutable_sockets(0)->set_cpulist(std::string(65537, '1'));
       }},
      {"probe.sockets[0].cpulist", [](R* r) {
         r->mutable_probe()->mutable_sockets(0)->set_cpulist("0-3;x");
       }},
      {"probe.sockets[0].free_bytes", [](R* r) {
         r->mutable_probe()->mutable_sockets(0)->set_free_bytes(-1);
       }},
      {"probe.sockets[0].hugepages_bytes", [](R* r) {
         r->mutable_probe()->mutable_sockets(0)->set_hugepages_bytes(int64_t{1} << 61);
       }},
      {"probe.sockets[0].unattributed_bytes", [](R* r) {
         r->mutable_probe()->mutable_sockets(0)->set_unattributed_bytes(-(int64_t{1} << 61));
       }},
      {"probe.sockets[0].touch_obtainable_bytes", [](R* r) {
         r->mutable_probe()->mutable_sockets(0)->set_touch_obtainable_bytes(-1);
       }},
      {"probe.device_nodes[0].numa_node", [](R* r) {
         r->mutable_probe()->mutable_device_nodes(0)->set_numa_node(65536);
       }},
      {"probe.device_nodes[0].total_bytes", [](R* r) {
         r->mutable_probe()->mutable_device_nodes(0)->set_total_bytes(-1);
       }},
      {"probe.device_nodes[0].free_bytes", [](R* r) {
         r->mutable_probe()->mutable_device_nodes(0)->set_free_bytes(-1);
       }},
      {"probe.error", [](R* r) { r->mutable_probe()->set_error(std::string(4097, 'e')); }},
      {"probe.probed_unix_ms", [](R* r) { r->mutable_probe()->set_probed_unix_ms(-1); }},
      {"slurm_job_id", [](R* r) { r->set_slurm_job_id("12;scancel -u me"); }},
      {"slurm_job_id", [](R* r) { r->set_slurm_job_id(std::string(21, '1')); }},
      {"slurm_step_id", [](R* r) { r->set_slurm_step_id("0.batch"); }},
      {"metrics_addr", [](R* r) { r->set_metrics_addr(std::string(4097, 'm')); }},
  });
}

TEST(ValidateTest, Report) {
  v1::AgentReport good;
  *good.mutable_id() = GoodId();
  *good.mutable_rank_exit() = GoodExit();
  using R = v1::AgentReport;
  ExpectEachRefused<R>(good, IdentityCases<R>() + Cases<R>{
      {"rank_exit.rank", [](R* r) { r->mutable_rank_exit()->set_rank(-1); }},
      {"rank_exit.rank", [](R* r) { r->mutable_rank_exit()->set_rank(1 << 20); }},
      {"rank_exit.exit_code", [](R* r) { r->mutable_rank_exit()->set_exit_code(256); }},
      {"rank_exit.signal", [](R* r) { r->mutable_rank_exit()->set_signal(-9); }},
      {"rank_exit.markers", [](R* r) {
         for (size_t i = 0; i < kFailureMarkerNames.size(); ++i)
           r->mutable_rank_exit()->add_markers("network");
       }},
      {"rank_exit.markers[1]", [](R* r) { r->mutable_rank_exit()->add_markers("frobnicated"); }},
      {"rank_exit.markers[1]", [](R* r) { r->mutable_rank_exit()->add_markers("host_oom"); }},
      {"rank_exit.evidence", [](R* r) {
         r->mutable_rank_exit()->set_evidence(std::string(513, 'x'));
       }},
      {"heartbeat.ranks_alive", [](R* r) { r->mutable_heartbeat()->set_ranks_alive(-1); }},
      {"heartbeat.ranks_alive", [](R* r) { r->mutable_heartbeat()->set_ranks_alive(4097); }},
  });
  v1::AgentReport batch;
  *batch.mutable_id() = GoodId();
  batch.mutable_batch()->set_seq(0);  // CheckBatch's, answered REFUSED on the stream
  EXPECT_TRUE(Check(batch).ok());
}

TEST(ValidateTest, ReportExit) {
  v1::ReportExitRequest good;
  *good.mutable_id() = GoodId();
  *good.add_ranks() = GoodExit();
  good.set_exit_code(1);
  good.set_reason("rank 3 exited with 137");
  good.set_oom_kills(-1);
  good.set_planned_stop("time_limit");
  using R = v1::ReportExitRequest;
  ExpectEachRefused<R>(good, IdentityCases<R>() + Cases<R>{
      {"ranks", [](R* r) {
         for (int i = 0; i < 4096; ++i) *r->add_ranks() = GoodExit();
       }},
      {"ranks[0].exit_code", [](R* r) { r->mutable_ranks(0)->set_exit_code(-1); }},
      {"ranks[0].markers[0]", [](R* r) { r->mutable_ranks(0)->set_markers(0, "x"); }},
      {"exit_code", [](R* r) { r->set_exit_code(300); }},
      {"reason", [](R* r) { r->set_reason(std::string(4097, 'r')); }},
      {"oom_kills", [](R* r) { r->set_oom_kills(-2); }},
      {"planned_stop", [](R* r) { r->set_planned_stop("whenever"); }},
  });
}

TEST(ValidateTest, NextLaunch) {
  v1::NextLaunchRequest good;
  *good.mutable_id() = GoodId();
  good.set_step_exit_code(0);
  using R = v1::NextLaunchRequest;
  ExpectEachRefused<R>(good, IdentityCases<R>() + Cases<R>{
      {"requeue_count", [](R* r) { r->set_requeue_count(-1); }},
      {"requeue_count", [](R* r) { r->set_requeue_count(1001); }},
      {"allocation_nodelist", [](R* r) {
         r->set_allocation_nodelist(std::string(65537, 'n'));
       }},
      {"step_exit_code", [](R* r) { r->set_step_exit_code(256); }},
      {"id.launch", [](R* r) { r->set_requeue_count(1); }},  // launch 0 with a requeue
      {"terminated_by_slurm", [](R* r) {
         r->set_requeue_count(1);
         r->mutable_id()->set_launch(0);
         r->set_terminated_by_slurm(true);
       }},
  });
  v1::NextLaunchRequest requeued = good;
  requeued.set_requeue_count(1);
  requeued.mutable_id()->set_launch(0);
  EXPECT_TRUE(Check(requeued).ok());
}

TEST(ValidateTest, StandBy) {
  v1::StandByRequest good;
  good.set_run_id("hello-1");
  good.set_pool(2);
  good.set_node("node9");
  good.set_secret("p00l");
  good.set_version("0.1.0");
  good.set_hostname("node9.cluster");
  good.set_slurm_job_id("77");
  EXPECT_TRUE(Check(good).ok());
  using R = v1::StandByRequest;
  ExpectEachRefused<R>(good, {
      {"run_id", [](R* r) { r->set_run_id("Hello 1"); }},
      {"pool", [](R* r) { r->set_pool(0); }},
      {"node", [](R* r) { r->set_node("node9;reboot"); }},
      {"secret", [](R* r) { r->set_secret(""); }},
      {"version", [](R* r) { r->set_version(""); }},
      {"hostname", [](R* r) { r->set_hostname("a b"); }},
      {"slurm_job_id", [](R* r) { r->set_slurm_job_id("77.0"); }},
      {"probe.error", [](R* r) { r->mutable_probe()->set_error(std::string(5000, 'e')); }},
  });
}

TEST(ValidateTest, UserRequests) {
  v1::SubmitRunRequest submit;
  submit.set_spec_toml("[job]\n");
  ExpectEachRefused<v1::SubmitRunRequest>(submit, {
      {"spec", [](auto* r) { r->set_spec_toml(std::string((1 << 20) + 1, ' ')); }},
  });
  v1::GetRunRequest get;
  get.set_run_id("hello-1");
  get.set_ranks_limit(4096);
  ExpectEachRefused<v1::GetRunRequest>(get, {
      {"run_id", [](auto* r) { r->set_run_id("Hello-1"); }},
      {"ranks_from", [](auto* r) { r->set_ranks_from(-1); }},
      {"ranks_limit", [](auto* r) { r->set_ranks_limit(-1); }},
      {"ranks_limit", [](auto* r) { r->set_ranks_limit(4097); }},
  });
  ExpectEachRefused<v1::ListRunsRequest>(v1::ListRunsRequest(), {
      {"limit", [](auto* r) { r->set_limit(-1); }},
      {"limit", [](auto* r) { r->set_limit(10001); }},
  });
  v1::CancelRunRequest cancel;
  cancel.set_run_id("hello-1");
  cancel.set_reason("wrong data");
  ExpectEachRefused<v1::CancelRunRequest>(cancel, {
      {"run_id", [](auto* r) { r->set_run_id(""); }},
      {"reason", [](auto* r) { r->set_reason(std::string(1025, 'r')); }},
      {"reason", [](auto* r) { r->set_reason("\x1b]0;pwned\x07"); }},
  });
  v1::WatchRunRequest watch;
  watch.set_run_id("hello-1");
  ExpectEachRefused<v1::WatchRunRequest>(watch, {
      {"run_id", [](auto* r) { r->set_run_id("-1"); }},
  });
  v1::ReadLogsRequest logs;
  logs.set_run_id("hello-1");
  logs.set_rank(-1);
  ExpectEachRefused<v1::ReadLogsRequest>(logs, {
      {"run_id", [](auto* r) { r->set_run_id("a/b"); }},
      {"rank", [](auto* r) { r->set_rank(-2); }},
      {"rank", [](auto* r) { r->set_rank(1 << 20); }},
      {"attempt", [](auto* r) { r->set_attempt(-1); }},
      {"attempt", [](auto* r) { r->set_attempt(kMaxAttempt + 1); }},
  });
  v1::QuarantineNodeRequest quarantine;
  quarantine.set_node("node2");
  quarantine.set_reason("flaky link");
  ExpectEachRefused<v1::QuarantineNodeRequest>(quarantine, {
      {"node", [](auto* r) { r->set_node("node2 --all"); }},
      {"reason", [](auto* r) { r->set_reason(""); }},
      {"reason", [](auto* r) { r->set_reason("line\nbreak"); }},
  });
  v1::ReleaseNodeRequest release;
  release.set_node("node2");
  ExpectEachRefused<v1::ReleaseNodeRequest>(release, {
      {"node", [](auto* r) { r->set_node(""); }},
  });
  v1::GateReportRequest gates;
  gates.set_run_id("hello-1");
  ExpectEachRefused<v1::GateReportRequest>(gates, {
      {"run_id", [](auto* r) { r->set_run_id(std::string(97, 'a')); }},
      {"attempt", [](auto* r) { r->set_attempt(-1); }},
  });
  v1::RunStepsRequest steps;
  steps.set_run_id("hello-1");
  ExpectEachRefused<v1::RunStepsRequest>(steps, {
      {"run_id", [](auto* r) { r->set_run_id(""); }},
      {"max_points", [](auto* r) { r->set_max_points(-1); }},
      {"max_points", [](auto* r) { r->set_max_points(kMaxStepPoints + 1); }},
  });
}

TEST(ValidateTest, ValuesAreEchoedCutAndWithoutControlCharacters) {
  v1::WatchRunRequest watch;
  watch.set_run_id("\x1b[2J" + std::string(500, 'a'));
  grpc::Status st = Check(watch);
  EXPECT_EQ(st.error_message().find('\x1b'), std::string::npos);
  EXPECT_LT(st.error_message().size(), 250u) << st.error_message();
}

}  // namespace
}  // namespace trellis::controller
