#include "trainer_core/checkpoint/async_save.h"

#include <cstdio>

#include "trainer_core/error.h"

namespace trellis::train {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

bool SameShape(const torch::Tensor& a, const torch::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes();
}

}  // namespace

AsyncCheckpointWriter::AsyncCheckpointWriter(std::string dir, spec::TrainerSpec spec, int keep,
                                             Sharding sharding, bool cuda)
    : dir_(std::move(dir)),
      spec_(std::move(spec)),
      keep_(keep),
      sharding_(std::move(sharding)),
      copy_stream_(cuda) {}

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  cancel_ = true;
  JoinWriter();
  copied_.Wait();  // the copies write into copy_'s memory
}

void AsyncCheckpointWriter::JoinWriter() {
  if (writer_.joinable()) writer_.join();
}

uint64_t AsyncCheckpointWriter::host_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, t] : copy_) n += t.nbytes();
  return n;
}

void AsyncCheckpointWriter::TakeCopy(const NamedTensors& state) {
  bool reuse = copy_.size() == state.size();
  for (size_t i = 0; reuse && i < state.size(); ++i)
    reuse = copy_[i].first == state[i].first && SameShape(copy_[i].second, state[i].second) &&
            copy_[i].second.is_pinned() == state[i].second.is_cuda();
  if (!reuse) {
    copy_.clear();
    for (const auto& [name, t] : state)
      copy_.emplace_back(name, torch::empty(t.sizes(), torch::TensorOptions()
                                                           .dtype(t.scalar_type())
                                                           .pinned_memory(t.is_cuda())));
  }
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
  cancel_ = false;
  error_.clear();
  in_flight_ = true;
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;
  const int device = copy_stream_.cuda() ? compat::CurrentCudaDevice() : -1;
  writer_ = std::thread([this, step_dir, rank, world, device] {
    try {
      if (device >= 0) compat::SetCudaDevice(device);
      copied_.Wait();
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
    flags = flags.cpu();
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
  CompleteStep(dir_, spec_, meta_, keep_, sharding_, result_);
  in_flight_ = false;
  stood_seconds_ += SecondsSince(start);
  return Completed{meta_.step, result_.bytes, SecondsSince(began_), stood_seconds_};
}

std::string DescribeSaveBehind(const AsyncCheckpointWriter::Completed& c) {
  const double gib = static_cast<double>(c.bytes) / (1ull << 30);
  char text[320];
  std::snprintf(text, sizeof text,
                "checkpoint step %lld written behind the steps in %.1f s: %.2f GiB (%.2f GiB/s, "
                "checksums and fsync included); the steps waited %.2f s for it",
                static_cast<long long>(c.step), c.write_seconds, gib,
                c.write_seconds > 0 ? gib / c.write_seconds : 0.0, c.stood_seconds);
  return text;
}

}  // namespace trellis::train
