#include "trainer_core/parallel/comm.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <utility>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#ifdef TRELLIS_HAS_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "trainer_core/compat.h"
#include "trainer_core/compat_c10d.h"
#include "trainer_core/compat_device_time.h"
#include "trainer_core/error.h"
#include "trainer_core/parallel/comm_clock.h"
#include "trainer_core/parallel/peer_watch.h"
#include "trainer_core/parallel/solo_comm.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {
namespace {

using Clock = std::chrono::steady_clock;

std::string Seconds(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs", d.count() / 1000.0);
  return buf;
}

// What goes on the wire: a flat view; bf16 as Half (same bytes; gloo rejects
// BFloat16 and moves Half without arithmetic).
torch::Tensor OnWire(const torch::Tensor& t) {
  TORCH_CHECK(t.is_contiguous(), "comm: tensors must be contiguous");
  auto flat = t.view(-1);
  return flat.scalar_type() == torch::kBFloat16 ? flat.view(torch::kHalf) : flat;
}

// A collective of world rank `rank` of `size` failed, as it was issued or
// waited for. On gloo it is a TrainError. On NCCL it ends the process here,
// after saying what failed: on its way up the error would destroy the process
// group, whose destructor joins PyTorch's watchdog thread, and that thread,
// having seen the same error, sleeps a minute before it aborts the process
// (SIGABRT, printing none of this); and the device work behind the failed
// collective never completes, so a later synchronisation would hang. (The
// peer watch ends a rank the same way.)
[[noreturn]] void Failed(const char* what, int rank, int size, bool cuda,
                         const std::string& error) {
  const std::string message = "comm: rank " + std::to_string(rank) + " of " +
                              std::to_string(size) + ": " + what +
                              " failed (a peer exited, timed out or lost its network): " + error;
  if (!cuda) throw TrainError(message);
  std::fprintf(stderr, "%s\ncomm: rank %d ends now: its NCCL work cannot complete\n",
               message.c_str(), rank);
  std::fflush(nullptr);
  std::_Exit(1);
}

// Waits for a collective; a failure is Failed's. (On NCCL a dead peer's error
// reaches PyTorch's watchdog thread first, and the next collective issued
// fails, not this wait: trainer_core/README.md.)
template <typename W>
void Wait(W&& work, const char* what, int rank, int size, bool cuda) {
  std::string error;
  try {
    work->wait();
    return;
  } catch (const c10::Error& e) {
    error = e.what_without_backtrace();
  } catch (const std::exception& e) {
    error = e.what();
  }
  Failed(what, rank, size, cuda, error);
}

// Every tensor of a collective lives where the backend works: NCCL takes
// only tensors on the rank's GPU, gloo only CPU tensors. Checked here so a
// misplaced tensor is an error naming the collective and the backend, not
// NCCL's "Tensors must be CUDA and dense".
void CheckDevice(const at::Tensor& t, bool cuda, const char* what) {
  if (t.is_cuda() == cuda) return;
  throw TrainError(std::string("comm: ") + what + " got a " + (t.is_cuda() ? "CUDA" : "CPU") +
                   " tensor, but this communicator is " +
                   (cuda ? "NCCL (tensors on the rank's GPU)" : "gloo (CPU tensors)"));
}

// The peer watch's view of the rendezvous store, over its own connection (the
// process group's client is busy on the main thread).
class StorePeers final : public PeerStore {
 public:
  explicit StorePeers(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void Beat(int me) override { store_->add(Key("beat", me), 1); }
  // A peer's "left" is read only while its beats stand still: half the reads
  // rank 0's store answers.
  void Read(const std::vector<int>& peers, std::vector<int64_t>* beats,
            std::vector<bool>* left) override {
    for (int r : peers) {
      const int64_t before = (*beats)[r];
      (*beats)[r] = store_->add(Key("beat", r), 0);  // add 0: a read that never blocks
      if ((*beats)[r] == before) (*left)[r] = store_->add(Key("left", r), 0) > 0;
    }
  }
  void Leave(int me) override { store_->add(Key("left", me), 1); }

 private:
  static std::string Key(const char* what, int rank) {
    return std::string("trellis/peer/") + what + "/" + std::to_string(rank);
  }
  c10::intrusive_ptr<c10d::Store> store_;
};

// The NCCL groups of a rank, for the peer watch's thread to ask after their
// errors (compat::BackendErrorOf). A group leaves before it is destroyed,
// under the same lock, so the watch never asks a group being destroyed.
class GroupErrors {
 public:
  void Add(const std::string& name, compat::Backend* group) {
    std::lock_guard<std::mutex> lock(mu_);
    groups_.emplace_back(name, group);
  }
  void Remove(compat::Backend* group) {
    std::lock_guard<std::mutex> lock(mu_);
    groups_.erase(std::remove_if(groups_.begin(), groups_.end(),
                                 [&](const auto& g) { return g.second == group; }),
                  groups_.end());
  }
  // "" while every group is healthy, else "COMM_ERROR in group world".
  std::string Poll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, group] : groups_)
      if (std::string e = compat::BackendErrorOf(group); !e.empty())
        return e + " in group " + name;
    return "";
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<std::string, compat::Backend*>> groups_;
};

// A c10d collective in flight. Its tensors are held until it is waited for:
// the backend may still read or write them (on a GPU, from its own stream).
class C10dWork final : public CommWork {
 public:
  C10dWork(c10::intrusive_ptr<c10d::Work> work, const char* what, int rank, int size, bool cuda,
           std::shared_ptr<CommClock::Span> span, std::vector<at::Tensor> keep)
      : work_(std::move(work)),
        what_(what),
        rank_(rank),
        size_(size),
        cuda_(cuda),
        span_(std::move(span)),
        keep_(std::move(keep)) {}
  // Dropped without Wait (an error path): on a GPU the current stream still
  // waits for the collective before its tensors go back to the caching
  // allocator, which would otherwise hand them out while NCCL writes them.
  // (On gloo the backend's thread holds the tensors itself.)
  ~C10dWork() override {
    if (!work_ || !cuda_) return;
    try {
      work_->wait();
    } catch (...) {
      // A failed collective: the run is already on an error path.
    }
  }
  void Wait() override {
    if (!work_) return;
    span_->waited = compat::DeviceStamp::Now(cuda_);
    trellis::train::Wait(work_, what_, rank_, size_, cuda_);
    if (!cuda_) span_->MarkDoneOnHost();  // where the backend's thread did not stamp it
    work_.reset();
    keep_.clear();
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  const char* what_;
  int rank_, size_;
  bool cuda_;
  std::shared_ptr<CommClock::Span> span_;
  std::vector<at::Tensor> keep_;
};

class C10dComm final : public Comm {
 public:
  C10dComm(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<compat::Backend> group,
           int rank, int size, CommOptions options, std::shared_ptr<CommClock> clock,
           std::shared_ptr<GroupErrors> errors, const std::string& name)
      : store_(std::move(store)),
        group_(std::move(group)),
        rank_(rank),
        size_(size),
        options_(std::move(options)),
        clock_(std::move(clock)),
        clock_group_(clock_->AddGroup()),
        errors_(std::move(errors)) {
    if (options_.cuda) errors_->Add(name, group_.get());
  }
  // A rank leaving on an error destroys its group while its peer watch still
  // runs: NCCL's group destructor joins PyTorch's watchdog thread, which,
  // having seen a dead peer's error, sleeps a minute and then aborts the
  // process (SIGABRT, naming nobody); gloo's waits for its collectives in
  // flight, up to the timeout. The watch ends the rank first, naming the peer.
  // A clean exit stops the watch first, saying the rank left.
  ~C10dComm() override {
    errors_->Remove(group_.get());
    if (std::uncaught_exceptions() > 0) group_.reset();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool cuda() const override { return options_.cuda; }

  // The world communicator watches its peers (subgroups share processes).
  void WatchPeers(std::unique_ptr<PeerWatch> watch) { watch_ = std::move(watch); }

  std::unique_ptr<CommWork> StartAllGather(const at::Tensor& shard,
                                           const at::Tensor& out) override {
    CheckDevice(shard, cuda(), "all-gather");
    CheckDevice(out, cuda(), "all-gather");
    auto in = OnWire(shard), all = OnWire(out);
    const int64_t n = in.numel();
    TORCH_CHECK(all.numel() == n * size_, "comm: all-gather output has the wrong size");
    if (n == 0) return FinishedWork();
    std::vector<at::Tensor> inputs{in};
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size_; ++r) outputs[0].push_back(all.narrow(0, r * n, n));
    return Launch("all-gather", [&] { return group_->allgather(outputs, inputs); }, {in, all});
  }

  std::unique_ptr<CommWork> StartAllToAll(const at::Tensor& send,
                                          const std::vector<int64_t>& send_counts,
                                          const at::Tensor& recv,
                                          const std::vector<int64_t>& recv_counts) override {
    TORCH_CHECK(static_cast<int>(send_counts.size()) == size_ &&
                    static_cast<int>(recv_counts.size()) == size_,
                "comm: all-to-all needs one count per rank");
    CheckDevice(send, cuda(), "all-to-all");
    CheckDevice(recv, cuda(), "all-to-all");
    auto s = OnWire(send), r = OnWire(recv);
    // Gloo wants real buffers even when nothing moves, and both backends
    // check that the counts add up to the buffer (a rank that receives no
    // token slots at all, seen with EP 4 once routing concentrates): an empty
    // view of one allocated element is both.
    if (!cuda() && s.numel() == 0) s = torch::empty({1}, s.options()).narrow(0, 0, 0);
    if (!cuda() && r.numel() == 0) r = torch::empty({1}, r.options()).narrow(0, 0, 0);
    std::vector<int64_t> sc = send_counts, rc = recv_counts;
    return Launch("all-to-all", [&] { return group_->alltoall_base(r, s, rc, sc); }, {s, r});
  }

  std::unique_ptr<CommWork> StartAllReduceSum(const at::Tensor& t) override {
    CheckDevice(t, cuda(), "all-reduce");
    std::vector<at::Tensor> tensors{t};
    return Launch("all-reduce", [&] { return group_->allreduce(tensors); }, {t});
  }

  void Barrier() override {
    if (!cuda()) return Launch("barrier", [&] { return group_->barrier(); }, {})->Wait();
    // NCCL's barrier guesses a device from the rank; an all-reduce on ours,
    // read back, is a barrier on the right GPU. Read through the mapping, not
    // by the copy engine, where a save's copy to the host may be in flight.
    auto one = torch::ones({1}, torch::TensorOptions(torch::kCUDA).dtype(torch::kFloat));
    AllReduceSum(one);
    (void)compat::ReadToHost(one);
  }

  void ResetTimes() override { clock_->Reset(); }
  std::optional<CommTimes> TakeTimes() override { return clock_->Take(); }

  std::unique_ptr<Comm> Subgroup(const std::string& name, const std::vector<int>& ranks) override;

  // The rendezvous: store, then the group. Both bounded by options.timeout.
  static std::unique_ptr<Comm> Connect(const CommOptions& o);

 private:
  static c10::intrusive_ptr<compat::Backend> MakeGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                       int rank, int size, const CommOptions& o,
                                                       const std::string& what);

  // Issues a collective and takes its moments: issued now; its end on a GPU
  // by a stamp on the group's side stream, on the CPU by the backend's
  // thread as it completes (its future's callback).
  template <typename Issue>
  std::unique_ptr<CommWork> Launch(const char* what, Issue&& issue, std::vector<at::Tensor> keep) {
    auto span = clock_->Issue(clock_group_);
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = issue();
    } catch (const compat::BackendError& e) {
      // NCCL that has seen a peer's sockets close (its socket transport)
      // refuses the next collective: a failure like a failed wait's.
      Failed(what, options_.rank, options_.world, options_.cuda, e.what_without_backtrace());
    }
    if (clock_->cuda()) {
      // The side stream waits (the host does not); errors come as Wait's.
      span->done = clock_->stream(clock_group_).StampAfter(
          [&] { Wait(work, what, options_.rank, options_.world, /*cuda=*/true); });
    } else {
      try {
        work->getFuture()->addCallback([span](c10::ivalue::Future&) { span->MarkDoneOnHost(); });
      } catch (const c10::Error&) {
        // No future for this work: its end is taken when it is waited for.
      }
    }
    return std::make_unique<C10dWork>(std::move(work), what, options_.rank, options_.world,
                                      clock_->cuda(), std::move(span), std::move(keep));
  }

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<compat::Backend> group_;
  int rank_, size_;
  CommOptions options_;
  std::shared_ptr<CommClock> clock_;  // shared with the subgroups
  int clock_group_;
  std::shared_ptr<GroupErrors> errors_;  // shared with the subgroups
  std::unique_ptr<PeerWatch> watch_;  // stopped before the group on a clean exit (~C10dComm)
};

std::string Where(const CommOptions& o) {
  return o.master_addr + ":" + std::to_string(o.master_port);
}

c10::intrusive_ptr<compat::Backend> C10dComm::MakeGroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, const CommOptions& o,
    const std::string& what) {
  const auto start = Clock::now();
  try {
    if (o.cuda) return compat::MakeNcclGroup(store, rank, size, o.timeout);
#ifndef TRELLIS_HAS_GLOO
    throw std::runtime_error("this build has no gloo (LibTorch without gloo headers): CPU ranks "
                             "cannot meet");
#else
    auto options = c10d::ProcessGroupGloo::Options::create(o.timeout);
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"))
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (o.master_addr == "127.0.0.1" || o.master_addr == "localhost")
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    options->threads = 1;
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
#endif
  } catch (const std::exception& e) {
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    throw TrainError("comm: rank " + std::to_string(o.rank) + ": " + what + " of " +
                     std::to_string(size) + " ranks through the store at " + Where(o) +
                     " did not complete (" + Seconds(took) + ", timeout " + Seconds(o.timeout) +
                     "; a rank is missing or unreachable): " + e.what());
  }
}

std::unique_ptr<Comm> C10dComm::Connect(const CommOptions& o) {
  if (o.master_port <= 0 || o.master_port > 65535)
    throw TrainError("comm: MASTER_PORT " + std::to_string(o.master_port) +
                     " is not a port (1..65535)");
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(o.master_port);
  so.isServer = o.rank == 0;
  so.numWorkers = o.world;
  so.waitWorkers = false;  // peers are awaited by the group rendezvous, under the same bound
  so.timeout = o.timeout;
  c10::intrusive_ptr<c10d::Store> store;
  const auto start = Clock::now();
  try {
    store = c10::make_intrusive<c10d::TCPStore>(o.master_addr, so);
  } catch (const std::exception& e) {
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    throw TrainError("comm: rank " + std::to_string(o.rank) + " cannot " +
                     (o.rank == 0 ? "serve" : "reach") + " the rendezvous store at " + Where(o) +
                     " (MASTER_ADDR:MASTER_PORT) within " + Seconds(took) + " (timeout " +
                     Seconds(o.timeout) + "): " + e.what());
  }
  auto group = MakeGroup(store, o.rank, o.world, o, "rendezvous");
  auto errors = std::make_shared<GroupErrors>();
  auto comm = std::make_unique<C10dComm>(store, group, o.rank, o.world, o,
                                         std::make_shared<CommClock>(o.cuda), errors, "world");
  // Every peer has met the group: from here on, silence means trouble.
  c10d::TCPStoreOptions watch_options = so;
  watch_options.isServer = false;
  try {
    auto client = c10::make_intrusive<c10d::TCPStore>(o.master_addr, watch_options);
    PeerWatchOptions watch = PeerWatch::ForTimeout(o.rank, o.world, o.timeout, Where(o));
    // NCCL's own word on a dead peer ends the rank at once (peer_watch.h).
    if (o.cuda) watch.backend_error = [errors] { return errors->Poll(); };
    comm->WatchPeers(
        std::make_unique<PeerWatch>(std::make_unique<StorePeers>(client), std::move(watch)));
  } catch (const std::exception& e) {
    throw TrainError("comm: rank " + std::to_string(o.rank) +
                     " cannot open its peer-watch connection to the store at " + Where(o) + ": " +
                     e.what());
  }
  return comm;
}

std::unique_ptr<Comm> C10dComm::Subgroup(const std::string& name, const std::vector<int>& ranks) {
  int index = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0 && ranks[i] <= ranks[i - 1]) throw TrainError("comm: subgroup ranks not ascending");
    if (ranks[i] == rank_) index = static_cast<int>(i);
  }
  if (index < 0) throw TrainError("comm: subgroup " + name + " does not include this rank");
  if (ranks.size() == 1) return MakeSoloComm(cuda());
  auto store = c10::make_intrusive<c10d::PrefixStore>("group/" + name, store_);
  auto group = MakeGroup(store, index, static_cast<int>(ranks.size()), options_,
                         "rendezvous of subgroup " + name);
  return std::make_unique<C10dComm>(store, group, index, static_cast<int>(ranks.size()), options_,
                                    clock_, errors_, name);
}

int EnvInt(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi)
    throw TrainError(std::string("environment: ") + name + "=\"" + v + "\" is not an integer in [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int>(x);
}

}  // namespace

bool CpuRanksCanMeet() {
#ifdef TRELLIS_HAS_GLOO
  return true;
#else
  return false;
#endif
}

void CheckRankInWorld(int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world)
    throw TrainError("comm: rank " + std::to_string(rank) + " is outside world size " +
                     std::to_string(world));
}

std::unique_ptr<Comm> ConnectComm(const CommOptions& options) {
  CheckRankInWorld(options.rank, options.world);
  if (options.world == 1) return MakeSoloComm(options.cuda);
  return C10dComm::Connect(options);
}

CommOptions CommOptionsFromEnv() {
  CommOptions o;
  o.world = EnvInt("WORLD_SIZE", 1, 1, 1 << 20);
  o.rank = EnvInt("RANK", 0, 0, o.world - 1);
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) o.master_addr = a;
  o.master_port = EnvInt("MASTER_PORT", 29500, 1, 65535);
  o.timeout = std::chrono::seconds(EnvInt("TRELLIS_COMM_TIMEOUT_S", 120, 1, 86400));
  return o;
}

}  // namespace trellis::train
