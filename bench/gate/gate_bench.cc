// Launch-gate latency: N workers register through the real gRPC path on
// loopback (a callback-API load generator); the gate decides once the last
// one is in. Measures the time from the last registration sent to the last
// decision received. Slurm is faked: it is not what is measured.
//
//   gate_bench --nodes 1536 --repeats 3   -> one JSON object on stdout

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "common/log.h"
#include "common/version.h"
#include "controller/app/controller.h"
#include "controller/app/sbatch_template.h"
#include "controller/rpc/agent_service.h"
#include "controller/rpc/controller_service.h"
#include "controller/slurm/fake_slurm_client.h"

namespace fs = std::filesystem;
using namespace trellis;
using namespace trellis::controller;
using Steady = std::chrono::steady_clock;

namespace {

// The user API over TCP takes a token (controller/rpc/authenticator.h).
constexpr char kBenchToken[] = "gate-bench-token-0123456789abcdef";


constexpr double kGiBytes = 1024.0 * 1024 * 1024;

// A GH200 node: 4 Grace sockets (one of them a little fuller) + 4 HBM nodes.
void FillProbe(v1::NodeProbe* probe, int node) {
  for (int s = 0; s < 4; ++s) {
    auto* so = probe->add_sockets();
    so->set_numa_node(s);
    so->set_cpulist(std::to_string(72 * s) + "-" + std::to_string(72 * s + 71));
    so->set_total_bytes(static_cast<int64_t>(119.7 * kGiBytes));
    so->set_free_bytes(static_cast<int64_t>((104.0 + (node * 7 + s) % 5) * kGiBytes));
    so->set_unattributed_bytes(static_cast<int64_t>(10.9 * kGiBytes));
  }
  for (int d = 0; d < 4; ++d) {
    auto* dn = probe->add_device_nodes();
    dn->set_numa_node(4 + 8 * d);
    dn->set_total_bytes(static_cast<int64_t>(96 * kGiBytes));
    dn->set_free_bytes(static_cast<int64_t>(95.4 * kGiBytes));
  }
}

struct Sample {
  double last_sent_to_decided_s;
  double first_sent_to_decided_s;
  int go = 0;
};

Sample RunOnce(v1::ControllerService::Stub& users, v1::AgentService::Stub& agents,
               const std::string& name, int nodes) {
  grpc::ClientContext sctx;
  sctx.AddMetadata("authorization", std::string("Bearer ") + kBenchToken);
  v1::SubmitRunRequest sreq;
  sreq.set_spec_toml("[job]\nname='" + name + "'\ncommand='true'\n[slurm]\nnodes=" +
                     std::to_string(nodes) + "\nranks_per_node=4\n[gate]\ntimeout_s=600\n");
  v1::SubmitRunResponse sresp;
  grpc::Status st = users.SubmitRun(&sctx, sreq, &sresp);
  if (!st.ok()) throw std::runtime_error("submit: " + st.error_message());
  std::string run_dir;
  for (int i = 0; i < 2000 && run_dir.empty(); ++i) {  // wait for the (fake) sbatch
    grpc::ClientContext gctx;
    gctx.AddMetadata("authorization", std::string("Bearer ") + kBenchToken);
    v1::GetRunRequest g;
    g.set_run_id(sresp.run_id());
    v1::Run run;
    users.GetRun(&gctx, g, &run);
    if (run.attempts_size() > 0) run_dir = run.run_dir();
    if (run_dir.empty()) usleep(5000);
  }
  std::string secret;
  std::ifstream(run_dir + "/attempt-1/secret") >> secret;

  std::vector<v1::RegisterRequest> reqs(nodes);
  for (int i = 0; i < nodes; ++i) {
    auto* id = reqs[i].mutable_id();
    id->set_run_id(sresp.run_id());
    id->set_attempt(1);
    id->set_launch(1);
    char node[32];
    std::snprintf(node, sizeof(node), "node%05d", i);
    id->set_node(node);
    id->set_secret(secret);
    reqs[i].set_version(kVersion);
    reqs[i].set_hostname(node);
    FillProbe(reqs[i].mutable_probe(), i);
  }
  std::vector<v1::GateDecision> resps(nodes);
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs(nodes);
  std::mutex mu;
  std::condition_variable cv;
  int done = 0, go = 0, failed = 0;
  auto t0 = Steady::now();
  for (int i = 0; i < nodes; ++i) {
    ctxs[i] = std::make_unique<grpc::ClientContext>();
    agents.async()->Register(ctxs[i].get(), &reqs[i], &resps[i], [&, i](grpc::Status s) {
      std::lock_guard<std::mutex> l(mu);
      if (!s.ok()) ++failed;
      if (resps[i].decision() == v1::GateDecision::DECISION_GO) ++go;
      if (++done == nodes) cv.notify_all();
    });
  }
  auto last_sent = Steady::now();
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return done == nodes; });
  auto decided = Steady::now();
  if (failed > 0) throw std::runtime_error(std::to_string(failed) + " registrations failed");
  return {std::chrono::duration<double>(decided - last_sent).count(),
          std::chrono::duration<double>(decided - t0).count(), go};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Launch-gate decision latency over the real gRPC path"};
  int nodes = 1536, repeats = 3;
  app.add_option("--nodes", nodes, "workers that register")->check(CLI::Range(1, 20000));
  app.add_option("--repeats", repeats, "runs to take the median of")->check(CLI::Range(1, 50));
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);

  fs::path dir = fs::temp_directory_path() / ("gate_bench_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto slurm = std::make_shared<FakeSlurmClient>();
  for (int i = 0; i < nodes; ++i) slurm->nodes.push_back({"node" + std::to_string(i), "idle"});
  // The job's allocation: the names RunOnce's workers claim (node00000, ...).
  char last[32];
  std::snprintf(last, sizeof(last), "%05d", nodes - 1);
  slurm->allocation = std::string("node[00000-") + last + "]";
  ControllerConfig config;
  config.output_root = (dir / "out").string();
  config.worker_bin = "/opt/trellis/bin/trellis-worker";
  config.sbatch_template = kSbatchTemplate;
  config.schedule_interval = std::chrono::milliseconds(10);
  config.reconcile_interval = std::chrono::hours(1);
  auto store = Store::Open((dir / "bench.db").string());
  if (!store.ok()) return 1;
  SystemClock clock;
  Controller controller(config, std::move(*store), slurm, &clock);
  ControllerServiceImpl users(&controller, Authenticator("bench", kBenchToken, "(in-process)"));
  AgentServiceImpl agents(&controller);
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&users);
  b.RegisterService(&agents);
  auto server = b.BuildAndStart();
  controller.SetAdvertiseAddress("127.0.0.1:" + std::to_string(port));
  if (!controller.Start().ok()) return 1;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_CONCURRENT_STREAMS, 100000);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                           grpc::InsecureChannelCredentials(), args);
  auto user_stub = v1::ControllerService::NewStub(channel);
  auto agent_stub = v1::AgentService::NewStub(channel);

  std::vector<Sample> samples;
  for (int r = 0; r < repeats; ++r)
    samples.push_back(RunOnce(*user_stub, *agent_stub, "bench", nodes));
  controller.BeginShutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  controller.Stop();
  fs::remove_all(dir);

  auto median = [&](auto field) {
    std::vector<double> v;
    for (const auto& s : samples) v.push_back(field(s));
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> lat;
  for (const auto& s : samples) lat.push_back(s.last_sent_to_decided_s);
  std::printf(
      "{\"nodes\": %d, \"repeats\": %d, \"go_nodes\": %d, "
      "\"decision_latency_s_median\": %.4f, \"decision_latency_s_min\": %.4f, "
      "\"decision_latency_s_max\": %.4f, \"registration_to_decision_s_median\": %.4f}\n",
      nodes, repeats, samples.back().go, median([](const Sample& s) { return s.last_sent_to_decided_s; }),
      *std::min_element(lat.begin(), lat.end()), *std::max_element(lat.begin(), lat.end()),
      median([](const Sample& s) { return s.first_sent_to_decided_s; }));
  return 0;
}
