// Simulated workers for the step-pipeline benchmark: N nodes of one run
// register with a real trellis-controller over loopback gRPC, then each
// streams one batch of R step records (one per rank) per second for T
// seconds on its Report stream, phases spread over the second. Measures each
// batch from its write to the controller's answer, and counts what was sent,
// stored, refused and never answered. One JSON object on stdout.
//
//   ingest_sim --controller 127.0.0.1:PORT --nodes 1536 --ranks 4 --seconds 600

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "common/version.h"
#include "trellis/v1/agent.grpc.pb.h"
#include "trellis/v1/controller.grpc.pb.h"

using namespace trellis;
using Steady = std::chrono::steady_clock;

namespace {

constexpr double kGiBytes = 1024.0 * 1024 * 1024;

struct Totals {
  std::mutex mu;
  std::vector<double> latency_s;
  uint64_t sent_batches = 0, sent_records = 0, stored_records = 0, duplicate_records = 0,
           refused_records = 0, broken_streams = 0;
};

// One node's Report stream: a write per tick (queued while one is in
// flight), acks read all along.
class NodeStream : public grpc::ClientBidiReactor<v1::AgentReport, v1::ReportAck> {
 public:
  NodeStream(v1::AgentService::Stub* stub, v1::WorkerIdentity id, int ranks, int first_rank,
             Totals* totals)
      : id_(std::move(id)), ranks_(ranks), first_rank_(first_rank), totals_(totals) {
    stub->async()->Report(&ctx_, this);
    StartRead(&ack_);
    StartCall();
  }

  // One batch: every rank's record of the next step.
  void Tick() {
    v1::AgentReport r;
    *r.mutable_id() = id_;
    v1::StepBatch* b = r.mutable_batch();
    b->set_seq(++seq_);
    for (int k = 0; k < ranks_; ++k) {
      v1::RankStep* s = b->add_steps();
      s->set_rank(first_rank_ + k);
      v1::StepRecord* rec = s->mutable_record();
      rec->set_step(static_cast<int64_t>(seq_));
      rec->set_loss(2.0 + 0.001 * k);
      rec->set_tokens(16384);
      rec->set_step_seconds(1.0);
      rec->set_fwd_seconds(0.3);
      rec->set_bwd_seconds(0.5);
      rec->set_optim_seconds(0.1);
      rec->set_comm_seconds(0.2);
      rec->set_alloc_retries(0);
      rec->set_mem_allocated_peak_bytes(int64_t{60} << 30);
      rec->set_nccl_max_ctas(16);
    }
    std::lock_guard<std::mutex> l(mu_);
    if (done_writing_ || broken_) return;
    pending_.push_back(std::move(r));
    if (!writing_) WriteNextLocked();
  }

  // No more ticks: half-close once every batch is answered.
  void EndWrites() {
    std::lock_guard<std::mutex> l(mu_);
    done_writing_ = true;
    MaybeHalfCloseLocked();
  }

  // Waits for the stream's end; its status.
  grpc::Status Await() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return finished_; });
    return status_;
  }
  size_t unanswered() {
    std::lock_guard<std::mutex> l(mu_);
    return sent_at_.size() + pending_.size();
  }
  void Cancel() { ctx_.TryCancel(); }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> l(mu_);
    writing_ = false;
    if (!ok) {
      broken_ = true;
      return;
    }
    if (!pending_.empty()) WriteNextLocked();
    MaybeHalfCloseLocked();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    auto now = Steady::now();
    std::lock_guard<std::mutex> l(mu_);
    auto it = sent_at_.find(ack_.seq());
    if (it != sent_at_.end()) {
      double s = std::chrono::duration<double>(now - it->second.first).count();
      size_t records = it->second.second;
      sent_at_.erase(it);
      std::lock_guard<std::mutex> t(totals_->mu);
      totals_->latency_s.push_back(s);
      if (ack_.result() == v1::ReportAck::RESULT_STORED) totals_->stored_records += records;
      if (ack_.result() == v1::ReportAck::RESULT_DUPLICATE) totals_->duplicate_records += records;
      if (ack_.result() == v1::ReportAck::RESULT_REFUSED) totals_->refused_records += records;
    }
    MaybeHalfCloseLocked();
    StartRead(&ack_);
  }

  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> l(mu_);
    status_ = s;
    finished_ = true;
    cv_.notify_all();
  }

 private:
  void WriteNextLocked() {
    current_ = std::move(pending_.front());
    pending_.pop_front();
    sent_at_[current_.batch().seq()] = {Steady::now(),
                                        static_cast<size_t>(current_.batch().steps_size())};
    {
      std::lock_guard<std::mutex> t(totals_->mu);
      ++totals_->sent_batches;
      totals_->sent_records += current_.batch().steps_size();
    }
    writing_ = true;
    StartWrite(&current_);
  }
  void MaybeHalfCloseLocked() {
    if (done_writing_ && !writing_ && pending_.empty() && sent_at_.empty() && !half_closed_) {
      half_closed_ = true;
      StartWritesDone();
    }
  }

  grpc::ClientContext ctx_;
  v1::WorkerIdentity id_;
  int ranks_, first_rank_;
  Totals* totals_;
  uint64_t seq_ = 0;
  v1::ReportAck ack_;
  v1::AgentReport current_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::AgentReport> pending_;
  std::map<uint64_t, std::pair<Steady::time_point, size_t>> sent_at_;
  bool writing_ = false, done_writing_ = false, half_closed_ = false, broken_ = false,
       finished_ = false;
  grpc::Status status_;
};

void FillProbe(v1::NodeProbe* probe) {
  for (int s = 0; s < 4; ++s) {
    auto* so = probe->add_sockets();
    so->set_numa_node(s);
    so->set_cpulist(std::to_string(72 * s) + "-" + std::to_string(72 * s + 71));
    so->set_total_bytes(static_cast<int64_t>(119.7 * kGiBytes));
    so->set_free_bytes(static_cast<int64_t>(106.0 * kGiBytes));
    so->set_unattributed_bytes(static_cast<int64_t>(10.9 * kGiBytes));
  }
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Simulated workers streaming step records to a real trellis-controller"};
  std::string controller, user_addr, run_name = "ingest";
  int nodes = 1536, ranks = 4, seconds = 600, channels = 32;
  app.add_option("--controller", controller, "host:port of the controller")->required();
  app.add_option("--user-addr", user_addr,
                 "the user API's address, the owner's unix:SOCKET (TCP would need a token)")
      ->required();
  app.add_option("--nodes", nodes, "simulated nodes")->check(CLI::Range(1, 16384));
  app.add_option("--ranks", ranks, "ranks per node (records per batch)")->check(CLI::Range(1, 64));
  app.add_option("--seconds", seconds, "how long each node streams")->check(CLI::Range(1, 86400));
  app.add_option("--channels", channels, "gRPC connections the nodes share")
      ->check(CLI::Range(1, 1024));
  app.add_option("--name", run_name, "the run's name");
  CLI11_PARSE(app, argc, argv);

  std::vector<std::unique_ptr<v1::AgentService::Stub>> stubs;
  for (int c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    args.SetInt("trellis.bench.channel", c);
    stubs.push_back(v1::AgentService::NewStub(
        grpc::CreateCustomChannel(controller, grpc::InsecureChannelCredentials(), args)));
  }
  auto users = v1::ControllerService::NewStub(
      grpc::CreateChannel(user_addr, grpc::InsecureChannelCredentials()));

  // The run, as a user submits it.
  grpc::ClientContext sctx;
  v1::SubmitRunRequest sreq;
  sreq.set_spec_toml("[job]\nname='" + run_name + "'\ncommand='true'\n[slurm]\nnodes=" +
                     std::to_string(nodes) + "\nranks_per_node=" + std::to_string(ranks) +
                     "\n[gate]\ntimeout_s=600\n[restart]\nhang_timeout_s=600\n");
  v1::SubmitRunResponse sresp;
  if (grpc::Status st = users->SubmitRun(&sctx, sreq, &sresp); !st.ok()) {
    std::cerr << "submit: " << st.error_message() << "\n";
    return 1;
  }
  std::string run_dir;
  for (int i = 0; i < 3000 && run_dir.empty(); ++i) {  // until the attempt is submitted
    grpc::ClientContext gctx;
    v1::GetRunRequest g;
    g.set_run_id(sresp.run_id());
    v1::Run run;
    if (users->GetRun(&gctx, g, &run).ok() && run.attempts_size() > 0) run_dir = run.run_dir();
    if (run_dir.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string secret;
  std::ifstream(run_dir + "/attempt-1/secret") >> secret;
  if (secret.empty()) {
    std::cerr << "no secret in " << run_dir << "/attempt-1 (was the attempt submitted?)\n";
    return 1;
  }

  // Every node registers; the gate decides once the last is in.
  std::vector<v1::WorkerIdentity> ids(nodes);
  std::vector<v1::RegisterRequest> reqs(nodes);
  std::vector<v1::GateDecision> decisions(nodes);
  std::vector<std::unique_ptr<grpc::ClientContext>> rctx(nodes);
  std::mutex mu;
  std::condition_variable cv;
  int answered = 0, go = 0;
  auto gate_start = Steady::now();
  for (int i = 0; i < nodes; ++i) {
    char node[32];
    std::snprintf(node, sizeof(node), "sim%05d", i);
    ids[i].set_run_id(sresp.run_id());
    ids[i].set_attempt(1);
    ids[i].set_launch(1);
    ids[i].set_node(node);
    ids[i].set_secret(secret);
    *reqs[i].mutable_id() = ids[i];
    reqs[i].set_version(kVersion);
    reqs[i].set_hostname(node);
    reqs[i].set_slurm_job_id("1000");
    reqs[i].set_slurm_step_id("0");
    FillProbe(reqs[i].mutable_probe());
    rctx[i] = std::make_unique<grpc::ClientContext>();
    stubs[i % channels]->async()->Register(rctx[i].get(), &reqs[i], &decisions[i],
                                           [&, i](grpc::Status s) {
                                             std::lock_guard<std::mutex> l(mu);
                                             if (s.ok() && decisions[i].decision() ==
                                                               v1::GateDecision::DECISION_GO)
                                               ++go;
                                             if (++answered == nodes) cv.notify_all();
                                           });
  }
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return answered == nodes; });
  }
  double gate_s = std::chrono::duration<double>(Steady::now() - gate_start).count();
  if (go != nodes) {
    std::cerr << go << " of " << nodes << " nodes got GO\n";
    return 1;
  }

  Totals totals;
  std::vector<std::unique_ptr<NodeStream>> streams;
  for (int i = 0; i < nodes; ++i) {
    int first_rank = decisions[i].rank_offset();
    streams.push_back(std::make_unique<NodeStream>(stubs[i % channels].get(), ids[i], ranks,
                                                   first_rank, &totals));
  }
  // Node i ticks at i/nodes of every second.
  auto start = Steady::now();
  const auto period = std::chrono::seconds(1);
  for (int s = 0; s < seconds; ++s) {
    for (int i = 0; i < nodes; ++i) {
      auto due = start + s * period +
                 std::chrono::duration_cast<Steady::duration>(period * (double(i) / nodes));
      std::this_thread::sleep_until(due);
      streams[i]->Tick();
    }
  }
  for (auto& st : streams) st->EndWrites();
  // Every batch answered or 60 s, whichever first.
  auto deadline = Steady::now() + std::chrono::seconds(60);
  uint64_t unanswered = 0;
  for (auto& st : streams) {
    while (st->unanswered() > 0 && Steady::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    unanswered += st->unanswered();
    if (st->unanswered() > 0) st->Cancel();
  }
  for (auto& st : streams)
    if (!st->Await().ok()) ++totals.broken_streams;
  double streamed_s = std::chrono::duration<double>(Steady::now() - start).count();

  std::lock_guard<std::mutex> l(totals.mu);
  char out[2048];
  std::snprintf(
      out, sizeof(out),
      "{\"run_id\": \"%s\", \"nodes\": %d, \"ranks_per_node\": %d, \"seconds\": %d, "
      "\"gate_s\": %.3f, \"streamed_s\": %.1f, \"sent_batches\": %llu, \"sent_records\": %llu, "
      "\"stored_records\": %llu, \"duplicate_records\": %llu, \"refused_records\": %llu, "
      "\"unanswered_records_batches\": %llu, \"broken_streams\": %llu, "
      "\"latency_ms_p50\": %.2f, \"latency_ms_p99\": %.2f, \"latency_ms_max\": %.2f}",
      sresp.run_id().c_str(), nodes, ranks, seconds, gate_s, streamed_s,
      static_cast<unsigned long long>(totals.sent_batches),
      static_cast<unsigned long long>(totals.sent_records),
      static_cast<unsigned long long>(totals.stored_records),
      static_cast<unsigned long long>(totals.duplicate_records),
      static_cast<unsigned long long>(totals.refused_records),
      static_cast<unsigned long long>(unanswered),
      static_cast<unsigned long long>(totals.broken_streams),
      1000 * Percentile(totals.latency_s, 0.5), 1000 * Percentile(totals.latency_s, 0.99),
      1000 * Percentile(totals.latency_s, 1.0));
  std::cout << out << std::endl;
  return 0;
}
