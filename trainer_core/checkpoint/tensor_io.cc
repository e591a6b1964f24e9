#include "trainer_core/checkpoint/tensor_io.h"

#include <algorithm>

#include "trainer_core/error.h"

namespace trellis::train {
namespace {

// The tensor's bytes as a flat byte tensor on its device (a view, no copy).
torch::Tensor Bytes(const torch::Tensor& t) {
  return t.detach().contiguous().view({-1}).view(torch::kByte);
}

}  // namespace

TensorIo::~TensorIo() { WaitAll(); }

void TensorIo::WaitAll() {
  for (auto& c : copied_) c.Wait();
}

torch::Tensor TensorIo::Pinned(int i) {
  if (!pinned_[i].defined())
    pinned_[i] = torch::empty({kPinnedPieceBytes},
                              torch::TensorOptions().dtype(torch::kByte).pinned_memory(true));
  return pinned_[i];
}

void TensorIo::Write(const torch::Tensor& t, ShardWriter& writer) {
  const torch::Tensor src = Bytes(t);
  const int64_t n = src.numel();
  if (!src.is_cuda()) {
    writer.Append(src.data_ptr(), static_cast<uint64_t>(n));
    return;
  }
  // Piece k is copied into buffer k % 2 while piece k - 1 is written from
  // the other one.
  auto issue = [&](int64_t at) {
    const int b = static_cast<int>((at / kPinnedPieceBytes) % 2);
    const int64_t len = std::min(kPinnedPieceBytes, n - at);
    copied_[b].Wait();
    Pinned(b).narrow(0, 0, len).copy_(src.narrow(0, at, len), /*non_blocking=*/true);
    copied_[b] = compat::DeviceStamp::Now(/*cuda=*/true);
  };
  if (n > 0) issue(0);
  for (int64_t at = 0; at < n; at += kPinnedPieceBytes) {
    const int b = static_cast<int>((at / kPinnedPieceBytes) % 2);
    copied_[b].Wait();
    if (at + kPinnedPieceBytes < n) issue(at + kPinnedPieceBytes);
    writer.Append(pinned_[b].data_ptr(),
                  static_cast<uint64_t>(std::min(kPinnedPieceBytes, n - at)));
  }
}

void TensorIo::Read(const ShardReader& shard, const ShardEntry& e, const torch::Tensor& t) {
  const torch::Tensor dst = t.detach().view({-1}).view(torch::kByte);
  if (!t.is_contiguous() || static_cast<uint64_t>(dst.numel()) != e.bytes)
    throw TrainError("checkpoint shard " + shard.path() + ": tensor '" + e.name + "' is " +
                     std::to_string(e.bytes) + " bytes, read into a tensor of " +
                     std::to_string(dst.numel()));
  if (!dst.is_cuda()) {
    shard.Read(e, dst.data_ptr());
    return;
  }
  // Piece k is read into buffer k % 2 once its copy of piece k - 2 is done,
  // then copied to the device while piece k + 1 is read.
  EntryReader reader(shard, e);
  const int64_t n = dst.numel();
  for (int64_t at = 0; at < n; at += kPinnedPieceBytes) {
    const int b = static_cast<int>((at / kPinnedPieceBytes) % 2);
    const int64_t len = std::min(kPinnedPieceBytes, n - at);
    copied_[b].Wait();
    torch::Tensor piece = Pinned(b).narrow(0, 0, len);
    reader.Next(piece.data_ptr(), static_cast<uint64_t>(len));
    dst.narrow(0, at, len).copy_(piece, /*non_blocking=*/true);
    copied_[b] = compat::DeviceStamp::Now(/*cuda=*/true);
  }
  reader.Verify();
}

}  // namespace trellis::train
