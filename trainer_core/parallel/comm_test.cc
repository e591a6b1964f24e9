// Comm over gloo between real processes on 127.0.0.1: all-gather, uneven
// all-to-all, the bf16 all-to-all reduce-scatter against an fp32 reference,
// collectives started ahead and their timing, and bounded, clearly worded
// failures when the store or a peer is missing.
#include "trainer_core/parallel/comm.h"

#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "trainer_core/error.h"
#include "trainer_core/parallel/comm_times.h"
#include "trainer_core/parallel/expert_parallel.h"
#include "trainer_core/parallel/local_ranks_test_util.h"
#include "trainer_core/parallel/multiprocess.h"
#include "trainer_core/parallel/pending.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {
namespace {

using testing::Failures;
using testing::FreePort;
using testing::RunRanks;
using namespace std::chrono_literals;

std::unique_ptr<Comm> Connect(int rank, int world, int port) {
  return testing::ConnectLocalRank(rank, world, port, 30s);
}

TEST(CommTest, AllGatherAndUnevenAllToAll) {
  const int world = 3, port = FreePort();
  auto outcomes = RunRanks(world, 60s, [&](int rank) -> std::string {
    auto comm = Connect(rank, world, port);
    for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
      auto shard = (torch::arange(5, torch::kFloat) + 100 * rank).to(dtype);
      auto all = torch::empty({5 * world}, dtype);
      comm->AllGatherInto(shard, all);
      auto want = (torch::arange(5, torch::kFloat).repeat({world}) +
                   100 * torch::arange(world, torch::kFloat).repeat_interleave(5))
                      .to(dtype);
      if (!torch::equal(all, want)) return "all-gather differs";

      // Rank i sends (i + j) % 3 copies of 10 i + j to rank j (some counts are
      // 0).
      std::vector<int64_t> sc(world), rc(world);
      std::vector<float> send_v, want_v;
      for (int j = 0; j < world; ++j) {
        sc[j] = (rank + j) % 3;
        rc[j] = (j + rank) % 3;
        for (int k = 0; k < sc[j]; ++k) send_v.push_back(10 * rank + j);
        for (int k = 0; k < rc[j]; ++k) want_v.push_back(10 * j + rank);
      }
      auto send = torch::tensor(send_v).to(dtype);
      auto recv = torch::full({static_cast<int64_t>(want_v.size())}, -1.0, dtype);
      comm->AllToAll(send, sc, recv, rc);
      if (!torch::equal(recv, torch::tensor(want_v).to(dtype))) return "uneven all-to-all differs";
    }
    comm->Barrier();
    return "";
  });
  EXPECT_EQ(Failures(outcomes), "");
}

// The expert-parallel row exchange where one rank receives no rows at all
// (its expert block got no token slots): rank 0 sends its 3 rows to rank 1,
// rank 1 keeps its 4. On the way back rank 0 has [0, H] to send and must
// still receive its rows; its gradient crosses the same empty exchange.
TEST(CommTest, RowAllToAllWithARankThatReceivesNothing) {
  const int world = 2, port = FreePort();
  auto outcomes = RunRanks(world, 60s, [&](int rank) -> std::string {
    auto comm = Connect(rank, world, port);
    const int64_t hidden = 3, rows = rank == 0 ? 3 : 4;
    const std::vector<int64_t> send = {0, rows};
    const std::vector<int64_t> recv = rank == 0 ? std::vector<int64_t>{0, 0}
                                                : std::vector<int64_t>{3, 4};
    auto x = (torch::arange(rows * hidden, torch::kFloat).view({rows, hidden}) + 100 * rank)
                 .requires_grad_();
    auto there = AllToAllRows(comm.get(), x, send, recv);
    if (there.size(0) != recv[0] + recv[1] || there.size(1) != hidden)
      return "forward: wrong shape";
    auto back = AllToAllRows(comm.get(), there * 2, recv, send);
    if (!torch::equal(back.detach(), x.detach() * 2)) return "back: not 2 x the rows sent";
    back.sum().backward();
    if (!torch::equal(x.grad(), torch::full_like(x, 2))) return "gradient differs";
    comm->Barrier();
    return "";
  });
  EXPECT_EQ(Failures(outcomes), "");
}

// Collectives started ahead: the right data when waited for, and the
// window's times. A gather waited for long after it ended is not exposed; one
// waited for at once mostly is; exposed never exceeds total.
TEST(CommTest, StartedCollectivesAreTimedAndExposedOnlyWhileWaitedFor) {
  const int world = 2, port = FreePort();
  auto outcomes = RunRanks(world, 60s, [&](int rank) -> std::string {
    auto comm = Connect(rank, world, port);
    auto dense = comm->Subgroup("dense", {0, 1});
    const int64_t n = 1 << 16;
    auto shard = torch::full({n}, static_cast<float>(rank + 1));
    auto all = torch::empty({2 * n});
    std::ostringstream msg;
    comm->Barrier();  // both ranks start the window together
    comm->ResetTimes();
    auto ahead = dense->StartAllGather(shard, all);
    auto grads = StartReduceScatter(*dense, torch::ones({2 * n}), Wire::kFp32);
    // "Compute" while both travel: long enough for both to end first even on a
    // loaded machine (a peer descheduled for a while), so that none is exposed.
    std::this_thread::sleep_for(1000ms);
    ahead->Wait();
    auto want = torch::cat({torch::full({n}, 1.0f), torch::full({n}, 2.0f)});
    if (!torch::equal(all, want)) return "started all-gather: wrong data";
    if (!torch::equal(grads.Finish(), torch::full({n}, 2.0f))) return "started reduce: wrong sum";
    auto hidden = comm->TakeTimes();
    if (!hidden) return "no times at world 2";
    if (!(hidden->total > 0) || hidden->exposed > 0.05 || hidden->exposed > hidden->total) {
      msg << "after a wait long after the end: total " << hidden->total << ", exposed "
          << hidden->exposed;
      return msg.str();
    }
    comm->ResetTimes();
    for (int i = 0; i < 5; ++i) comm->AllGatherInto(shard, all);
    auto at_once = comm->TakeTimes();
    if (!(at_once->total > 0) || at_once->exposed > at_once->total ||
        at_once->exposed < 0.25 * at_once->total) {
      msg << "waited at once: total " << at_once->total << ", exposed " << at_once->exposed;
      return msg.str();
    }
    return "";
  });
  EXPECT_EQ(Failures(outcomes), "");
}

// The counting rule on hand-made moments.
TEST(CommTest, CollectiveTimesCountQueuesAndWaits) {
  // One group: b is issued while a runs, so it starts when a ends (1.0); the
  // caller waits for a from 0.8 and for b from 1.5.
  auto t = SumCollectives({{0, 0.0, 1.0, 0.8}, {0, 0.5, 2.0, 1.5}});
  EXPECT_DOUBLE_EQ(t.total, 2.0);
  EXPECT_DOUBLE_EQ(t.exposed, 0.2 + 0.5);
  // Waited for after it ended, or never: not exposed. Two groups run side by
  // side and both count.
  t = SumCollectives({{0, 0.0, 1.0, 3.0}, {1, 0.0, 1.0, -1}});
  EXPECT_DOUBLE_EQ(t.total, 2.0);
  EXPECT_DOUBLE_EQ(t.exposed, 0.0);
  // Overlapping waits (GPU clocks a little apart) count once.
  t = SumCollectives({{0, 0.0, 1.0, 0.0}, {1, 0.0, 1.2, 0.9}});
  EXPECT_DOUBLE_EQ(t.total, 2.2);
  EXPECT_DOUBLE_EQ(t.exposed, 1.2);
  EXPECT_EQ(SumCollectives({}).total, 0);
}

// Rank r's contribution: values drawn from seed r. `representable` draws bf16
// values of magnitude [2^-8, 4], so any partial sum of 4 of them fits fp32's
// 24-bit significand exactly and the summation order cannot matter.
torch::Tensor Contribution(int rank, int64_t n, bool representable) {
  auto gen = at::detail::createCPUGenerator(1000 + rank);
  auto x = at::randn({n}, gen);
  if (!representable) return x;
  auto mag = x.abs().clamp(1.0 / 256, 4.0);
  return (x.sign() * mag).to(torch::kBFloat16).to(torch::kFloat);
}

TEST(CommTest, Bf16AllToAllReductionMatchesFp32ReduceScatter) {
  const int world = 4, port = FreePort();
  const int64_t n = 1000;  // per rank
  auto outcomes = RunRanks(world, 60s, [&](int rank) -> std::string {
    auto comm = Connect(rank, world, port);
    for (bool representable : {true, false}) {
      auto mine = Contribution(rank, n * world, representable);
      // Reference: an fp32 all-reduce (gloo's own summation), this rank's
      // segment.
      auto reference = mine.clone();
      comm->AllReduceSum(reference);
      reference = reference.narrow(0, rank * n, n);
      auto bf16 = ReduceScatter(*comm, mine, Wire::kBf16);
      auto fp32 = ReduceScatter(*comm, mine, Wire::kFp32);
      std::ostringstream msg;
      if (representable) {
        if (!torch::equal(bf16, reference)) return "bf16 wire not bit-exact on bf16 inputs";
        if (!torch::equal(fp32, reference)) return "fp32 wire not bit-exact on bf16 inputs";
        continue;
      }
      // Each input is rounded once to bf16 (8 significant bits: relative error
      // <= 2^-8); the sum of the absolute inputs bounds the total, plus fp32
      // summation slack.
      auto abs_sum = mine.abs().clone();
      comm->AllReduceSum(abs_sum);
      abs_sum = abs_sum.narrow(0, rank * n, n);
      auto bound = abs_sum * (1.0 / 256) + 1e-6;
      auto err = (bf16 - reference).abs();
      if ((err > bound).any().item<bool>()) return "bf16 wire error above the bf16 rounding bound";
      if (err.max().item<float>() == 0) return "bf16 wire shows no rounding at all (not bf16?)";
      if (!torch::allclose(fp32, reference, 1e-6, 1e-6)) return "fp32 wire differs";
    }
    return "";
  });
  EXPECT_EQ(Failures(outcomes), "");
}

TEST(CommTest, SubgroupsCollectAmongTheirMembers) {
  const int world = 4, port = FreePort();
  auto outcomes = RunRanks(world, 60s, [&](int rank) -> std::string {
    auto comm = Connect(rank, world, port);
    // Two "nodes" of 2: {0,1}, {2,3}; and the cross-node groups {0,2}, {1,3}.
    const int node = rank / 2, local = rank % 2;
    auto intra = comm->Subgroup("node" + std::to_string(node), {2 * node, 2 * node + 1});
    auto cross = comm->Subgroup("local" + std::to_string(local), {local, local + 2});
    auto t = torch::full({1}, static_cast<double>(rank), torch::kDouble);
    intra->AllReduceSum(t);
    if (t.item<double>() != 4 * node + 1) return "intra-node sum wrong";
    t.fill_(rank);
    cross->AllReduceSum(t);
    if (t.item<double>() != 2 * local + 2) return "cross-node sum wrong";
    if (intra->rank() != local || cross->rank() != node) return "subgroup ranks wrong";
    return "";
  });
  EXPECT_EQ(Failures(outcomes), "");
}

TEST(CommTest, UnreachableStoreFailsWithinTimeoutNamingTheAddress) {
  const int port = FreePort();  // nothing listens there
  auto outcomes = RunRanks(1, 60s, [&](int) -> std::string {
    CommOptions o;
    o.rank = 1;
    o.world = 2;
    o.master_port = port;
    o.timeout = 2s;
    auto start = std::chrono::steady_clock::now();
    try {
      ConnectComm(o);
      return "connected to a store nobody serves";
    } catch (const TrainError& e) {
      auto took = std::chrono::steady_clock::now() - start;
      std::string m = e.what();
      if (m.find("127.0.0.1:" + std::to_string(port)) == std::string::npos)
        return "message does not name the address: " + m;
      if (m.find("cannot reach the rendezvous store") == std::string::npos)
        return "message unclear: " + m;
      if (took > 15s) return "took longer than the timeout allows: " + m;
    }
    return "";
  });
  EXPECT_EQ(Failures(outcomes), "");
}

TEST(CommTest, MissingPeerFailsWithinTimeout) {
  const int port = FreePort();
  auto outcomes = RunRanks(1, 60s, [&](int) -> std::string {
    CommOptions o;
    o.rank = 0;  // serves the store; rank 1 never comes
    o.world = 2;
    o.master_port = port;
    o.timeout = 2s;
    auto start = std::chrono::steady_clock::now();
    try {
      ConnectComm(o);
      return "rendezvous completed without rank 1";
    } catch (const TrainError& e) {
      auto took = std::chrono::steady_clock::now() - start;
      std::string m = e.what();
      if (m.find("127.0.0.1:" + std::to_string(port)) == std::string::npos ||
          m.find("rank is missing") == std::string::npos)
        return "message unclear: " + m;
      if (took > 15s) return "took longer than the timeout allows: " + m;
    }
    return "";
  });
  EXPECT_EQ(Failures(outcomes), "");
}

TEST(CommTest, BadEnvironmentIsAClearError) {
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("RANK", "7", 1);
  try {
    CommOptionsFromEnv();
    ADD_FAILURE() << "accepted RANK=7 with WORLD_SIZE=4";
  } catch (const TrainError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK=\"7\""), std::string::npos) << e.what();
  }
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("RANK");
}

}  // namespace
}  // namespace trellis::train
