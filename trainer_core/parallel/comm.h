#pragma once
// Collectives between the ranks of a run, over c10d: ProcessGroupGloo on CPU,
// ProcessGroupNCCL on GPU (where LibTorch has it), rendezvous through a
// TCPStore at MASTER_ADDR:MASTER_PORT. What gloo in LibTorch 1.13 lacks
// (_allgather_base, reduce-scatter, bf16 on the wire) is built here from
// allgather of tensor lists and alltoall_base on Half/Byte views.
// Collectives can be started ahead of their use (Start*) and waited for
// later, and every one is timed (TakeTimes).
// Torch-free header: tensors are only named, never used.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace trellis::train {

// How gradients travel in ReduceScatter: bf16 (half the bytes, summed in fp32
// by the owner) or fp32 (exact up to summation order; for exactness tests).
enum class Wire { kBf16, kFp32 };

struct CommOptions {
  int rank = 0;
  int world = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  // Bounds the rendezvous (reaching the store, meeting every peer) and every
  // collective: a rank that is missing makes the others fail, never hang.
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  bool cuda = false;  // NCCL on the current CUDA device instead of gloo
};

// A collective in flight (Comm::Start*). Wait() once, before reading its
// output or changing its input: on gloo the host waits; on NCCL the current
// CUDA stream waits and the host goes on. One dropped without Wait finishes
// on its own (error paths only).
class CommWork {
 public:
  virtual ~CommWork() = default;
  virtual void Wait() = 0;
};

// Seconds of collective work in a window (a training step).
struct CommTimes {
  double total = 0;    // the collectives' own durations, summed
  double exposed = 0;  // of it, time the caller's work stood waiting for one
};

// Every call is collective: all members call it in the same order. Tensors
// are contiguous; counts are in elements. Errors throw TrainError.
class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // True when the members meet over NCCL: every tensor handed to a collective
  // must then live on this rank's current CUDA device (gloo: on the CPU).
  // Callers make their scratch tensors where the communicator wants them.
  virtual bool cuda() const = 0;

  // out = the ranks' `shard`s concatenated in rank order (out.numel() ==
  // size() * shard.numel(), same dtype).
  virtual std::unique_ptr<CommWork> StartAllGather(const at::Tensor& shard,
                                                   const at::Tensor& out) = 0;
  // Rank i's send[segment j] lands in rank j's recv[segment i]; segments are
  // consecutive with send_counts / recv_counts elements (one per rank, uneven
  // allowed). bf16 travels as a Half view (gloo rejects BFloat16).
  virtual std::unique_ptr<CommWork> StartAllToAll(const at::Tensor& send,
                                                  const std::vector<int64_t>& send_counts,
                                                  const at::Tensor& recv,
                                                  const std::vector<int64_t>& recv_counts) = 0;
  // In place, any shape.
  virtual std::unique_ptr<CommWork> StartAllReduceSum(const at::Tensor& t) = 0;
  virtual void Barrier() = 0;

  // The same, waited for at once.
  void AllGatherInto(const at::Tensor& shard, const at::Tensor& out) {
    StartAllGather(shard, out)->Wait();
  }
  void AllToAll(const at::Tensor& send, const std::vector<int64_t>& send_counts,
                const at::Tensor& recv, const std::vector<int64_t>& recv_counts) {
    StartAllToAll(send, send_counts, recv, recv_counts)->Wait();
  }
  void AllReduceSum(const at::Tensor& t) { StartAllReduceSum(t)->Wait(); }

  // Opens a timing window for this communicator and the subgroups made from
  // it (they share one clock).
  virtual void ResetTimes() = 0;
  // Collective time since ResetTimes over the communicator and its subgroups
  // (comm_times.h says how it is counted); nullopt where nothing travels
  // (world 1). On a GPU it waits for the timing events of the window.
  virtual std::optional<CommTimes> TakeTimes() = 0;

  // A communicator over `ranks` (global ranks, ascending, including this
  // one). Every member calls it with the same name and ranks.
  virtual std::unique_ptr<Comm> Subgroup(const std::string& name,
                                         const std::vector<int>& ranks) = 0;
};

// World 1 needs no store. Otherwise rank 0 serves the TCPStore. Throws
// TrainError naming MASTER_ADDR:MASTER_PORT when the store or a peer cannot be
// reached within options.timeout.
std::unique_ptr<Comm> ConnectComm(const CommOptions& options);
// Throws TrainError unless 0 <= rank < world (ConnectComm checks it first).
void CheckRankInWorld(int rank, int world);

// False in LibTorch builds without gloo (the python package's): CPU ranks
// cannot meet there, only CUDA ranks over NCCL.
bool CpuRanksCanMeet();

// RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (world 1 when RANK is unset);
// TRELLIS_COMM_TIMEOUT_S overrides the timeout. Throws TrainError on bad
// values.
CommOptions CommOptionsFromEnv();

// Reduce-scatter built from one all-to-all: `full` is this rank's
// contribution, size() * n contiguous fp32 (or bf16) elements; returns the fp32 sum over
// ranks of segment rank() ([n]), added in rank order. With Wire::kBf16 each
// segment travels rounded to bf16, so the result equals an fp32
// reduce-scatter of the bf16-rounded inputs (bit for bit when every partial
// sum is exact in fp32). StartReduceScatter (pending.h) starts it.
at::Tensor ReduceScatter(Comm& comm, const at::Tensor& full, Wire wire);

}  // namespace trellis::train
