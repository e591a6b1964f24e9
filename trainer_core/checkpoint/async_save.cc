#include "trainer_core/checkpoint/async_save.h"

#include <cstdio>

#include "trainer_core/error.h"
#include "trainer_core/memory/host_room.h"

namespace trellis::train {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// 256 bytes: any dtype's alignment, and a GPU copy's best.
constexpr int64_t kSlotAlign = 256;

std::unique_ptr<HostArena> MakeArena(int64_t bytes, bool page_lock) {
  return HostArena::Allocate(bytes, page_lock, "checkpoint.async",
                             "a host copy of the rank's state; or checkpoint.async = false");
}

}  // namespace

AsyncCheckpointWriter::AsyncCheckpointWriter(std::string dir, spec::TrainerSpec spec, int keep,
                                             Sharding sharding, bool cuda, CheckpointPruner* pruner)
    : dir_(std::move(dir)),
      spec_(std::move(spec)),
      keep_(keep),
      sharding_(std::move(sharding)),
      pruner_(pruner),
      copy_stream_(cuda) {}

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  cancel_ = true;
  JoinWriter();
  if (preparing_.joinable()) preparing_.join();
  copied_.Wait();  // the copies write into the arena
}

std::optional<int64_t> AsyncCheckpointWriter::Abandon() {
  if (!in_flight_) return std::nullopt;
  cancel_ = true;
  JoinWriter();
  in_flight_ = false;
  return meta_.step;
}

void AsyncCheckpointWriter::JoinWriter() {
  if (writer_.joinable()) writer_.join();
}

int64_t AsyncCheckpointWriter::CopyBytes(const NamedTensors& state) {
  int64_t total = 0;
  Layout(state, &total);
  return HostArena::Rounded(total);
}

std::vector<AsyncCheckpointWriter::Slot> AsyncCheckpointWriter::Layout(const NamedTensors& state,
                                                                       int64_t* total) {
  std::vector<Slot> slots;
  int64_t at = 0;
  for (const auto& [name, t] : state) {
    const int64_t bytes = static_cast<int64_t>(t.nbytes());
    slots.push_back({name, t.scalar_type(), t.sizes().vec(), at, bytes});
    at += (bytes + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
  }
  *total = at;
  return slots;
}

void AsyncCheckpointWriter::Prepare(const NamedTensors& state) {
  if (arena_ || preparing_.joinable()) return;
  int64_t total = 0;
  layout_ = Layout(state, &total);
  const bool lock = copy_stream_.cuda();
  const int device = lock ? compat::CurrentCudaDevice() : -1;
  preparing_ = std::thread([this, total, lock, device] {
    try {
      const auto start = Clock::now();
      if (device >= 0) compat::SetCudaDevice(device);
      arena_ = MakeArena(total, lock);
      arena_seconds_ = SecondsSince(start);
      arena_bytes_ = static_cast<uint64_t>(arena_->bytes());
    } catch (const std::exception& e) {
      prepare_error_ = e.what();
    }
  });
}

// The arena Prepare made (or one made now), and a view of it per tensor.
void AsyncCheckpointWriter::AwaitArena(const NamedTensors& state) {
  if (preparing_.joinable()) preparing_.join();
  if (!prepare_error_.empty()) throw TrainError(prepare_error_);
  int64_t total = 0;
  std::vector<Slot> wanted = Layout(state, &total);
  bool same = arena_ && wanted.size() == layout_.size();
  for (size_t i = 0; same && i < wanted.size(); ++i)
    same = wanted[i].name == layout_[i].name && wanted[i].dtype == layout_[i].dtype &&
           wanted[i].sizes == layout_[i].sizes;
  if (!same) {
    const auto start = Clock::now();
    copy_.clear();
    arena_.reset();
    arena_bytes_ = 0;
    arena_ = MakeArena(total, copy_stream_.cuda());
    arena_seconds_ = SecondsSince(start);
    arena_bytes_ = static_cast<uint64_t>(arena_->bytes());
    layout_ = std::move(wanted);
  }
  if (!copy_.empty()) return;
  for (const Slot& s : layout_)
    copy_.emplace_back(s.name, torch::from_blob(arena_->base() + s.offset, s.sizes,
                                                torch::TensorOptions().dtype(s.dtype)));
}

void AsyncCheckpointWriter::TakeCopy(const NamedTensors& state) {
  AwaitArena(state);
  torch::NoGradGuard no_grad;
  // Host tensors now; device ones on the copy stream, once the current
  // stream has reached this point (the step's optimizer wrote them). The
  // state's tensors live as long as the trainer, so no other stream can be
  // handed their memory while the copies read it.
  for (size_t i = 0; i < state.size(); ++i)
    if (!state[i].second.is_cuda()) copy_[i].second.copy_(state[i].second);
  const compat::DeviceStamp ready = compat::DeviceStamp::Now(copy_stream_.cuda());
  copied_ = copy_stream_.StampAfter([&] {
    ready.BlockCurrentStream();
    for (size_t i = 0; i < state.size(); ++i)
      if (state[i].second.is_cuda())
        copy_[i].second.copy_(state[i].second.detach(), /*non_blocking=*/true);
  });
  copy_awaited_ = !copy_stream_.cuda();
}

std::optional<AsyncCheckpointWriter::Completed> AsyncCheckpointWriter::Begin(
    const CheckpointMeta& meta, const NamedTensors& state) {
  std::optional<Completed> before;
  if (in_flight_) before = Poll(/*wait=*/true);
  const auto start = Clock::now();
  Comm* comm = sharding_.comm;
  const std::string step_dir = BeginStep(dir_, meta.step, comm);
  copied_.Wait();  // the last save's copies, before their memory is written again
  TakeCopy(state);
  meta_ = meta;
  began_ = start;
  written_ = false;
  copy_seconds_ = 0;
  cancel_ = false;
  error_.clear();
  in_flight_ = true;
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;
  const int device = copy_stream_.cuda() ? compat::CurrentCudaDevice() : -1;
  writer_ = std::thread([this, step_dir, rank, world, device] {
    try {
      if (device >= 0) compat::SetCudaDevice(device);
      copied_.Wait();
      if (device >= 0) copy_seconds_ = SecondsSince(began_);
      result_ = WriteShard(step_dir, copy_, rank, world, [this] { return cancel_.load(); });
    } catch (const std::exception& e) {
      error_ = e.what();
    }
    written_ = true;
  });
  stood_seconds_ = SecondsSince(start);
  return before;
}

void AsyncCheckpointWriter::BeforeStateChanges() {
  if (copy_awaited_) return;
  copied_.BlockCurrentStream();
  copy_awaited_ = true;
}

std::optional<AsyncCheckpointWriter::Completed> AsyncCheckpointWriter::Poll(bool wait) {
  if (!in_flight_) return std::nullopt;
  const auto start = Clock::now();
  if (wait) JoinWriter();
  Comm* comm = sharding_.comm;
  // [ranks still writing, ranks whose write failed], over the world.
  const bool written = written_.load();
  const bool failed = written && !error_.empty();
  auto flags = torch::tensor({written ? 0.0f : 1.0f, failed ? 1.0f : 0.0f});
  if (comm && comm->size() > 1) {
    flags = flags.to(comm->cuda() ? torch::kCUDA : torch::kCPU);
    comm->AllReduceSum(flags);
    flags = compat::ReadToHost(flags);  // not behind the copy this writer may have in flight
  }
  const int writing = static_cast<int>(flags[0].item<float>());
  const int failures = static_cast<int>(flags[1].item<float>());
  if (failures > 0) {
    cancel_ = true;
    JoinWriter();
    in_flight_ = false;
    const int world = comm ? comm->size() : 1;
    throw TrainError("checkpoint step " + std::to_string(meta_.step) + " written behind the " +
                     "steps failed on " + std::to_string(failures) + " of " +
                     std::to_string(world) + " rank" + (world == 1 ? "" : "s") +
                     (failed ? ": " + error_ : " (this rank's shard was written)") +
                     "; the step is left incomplete");
  }
  if (writing > 0) {
    stood_seconds_ += SecondsSince(start);
    return std::nullopt;
  }
  JoinWriter();
  CompleteStep(dir_, spec_, meta_, keep_, sharding_, result_, pruner_);
  in_flight_ = false;
  stood_seconds_ += SecondsSince(start);
  Completed done;
  done.step = meta_.step;
  done.bytes = result_.bytes;
  done.write_seconds = SecondsSince(began_);
  done.stood_seconds = stood_seconds_;
  done.arena_seconds = arena_seconds_;
  done.copy_seconds = copy_seconds_;
  arena_seconds_ = 0;  // said once
  return done;
}

std::string WhyTheCopyDoesNotFit(const NamedTensors& state, int64_t also, int64_t keep_free,
                                 const std::vector<MemoryBound>& bounds) {
  return WhyItDoesNotFit(AsyncCheckpointWriter::CopyBytes(state) + also, bounds, keep_free);
}

std::string DescribeSaveBehind(const AsyncCheckpointWriter::Completed& c) {
  const double gib = static_cast<double>(c.bytes) / (1ull << 30);
  char text[320];
  std::snprintf(text, sizeof text,
                "checkpoint step %lld written behind the steps in %.1f s: %.2f GiB (%.2f GiB/s, "
                "checksums and fsync included); the steps waited %.2f s for it",
                static_cast<long long>(c.step), c.write_seconds, gib,
                c.write_seconds > 0 ? gib / c.write_seconds : 0.0, c.stood_seconds);
  std::string out = text;
  if (c.copy_seconds > 0) {
    std::snprintf(text, sizeof text, "; the copy to host memory took %.2f s (%.1f GB/s)",
                  c.copy_seconds, c.bytes / c.copy_seconds / 1e9);
    out += text;
  }
  if (c.arena_seconds > 0) {
    std::snprintf(text, sizeof text, "; its host copy's memory took %.1f s to make",
                  c.arena_seconds);
    out += text;
  }
  return out;
}

}  // namespace trellis::train
