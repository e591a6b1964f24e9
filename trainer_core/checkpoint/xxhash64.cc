#include "trainer_core/checkpoint/xxhash64.h"

#include <cstring>

namespace trellis::train {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kP3 = 0x165667B19E3779F9ull;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ull;

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads (shards are little-endian; so are x86-64 and aarch64).
inline uint64_t Load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t Load32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t Round(uint64_t acc, uint64_t input) {
  acc += input * kP2;
  return Rotl(acc, 31) * kP1;
}

inline uint64_t Merge(uint64_t h, uint64_t lane) {
  h ^= Round(0, lane);
  return h * kP1 + kP4;
}

// Rounds over every whole 32 bytes of [p, p + n); returns the bytes taken.
size_t Stripes(uint64_t lanes[4], const unsigned char* p, size_t n) {
  const unsigned char* const start = p;
  uint64_t a = lanes[0], b = lanes[1], c = lanes[2], d = lanes[3];
  for (; n >= 32; n -= 32, p += 32) {
    a = Round(a, Load64(p));
    b = Round(b, Load64(p + 8));
    c = Round(c, Load64(p + 16));
    d = Round(d, Load64(p + 24));
  }
  lanes[0] = a, lanes[1] = b, lanes[2] = c, lanes[3] = d;
  return static_cast<size_t>(p - start);
}

}  // namespace

Xxh64::Xxh64() : lanes_{kP1 + kP2, kP2, 0, 0 - kP1} {}

void Xxh64::Update(const void* data, size_t n) {
  auto p = static_cast<const unsigned char*>(data);
  total_ += n;
  if (pending_bytes_ > 0) {
    const size_t take = n < 32 - pending_bytes_ ? n : 32 - pending_bytes_;
    std::memcpy(pending_ + pending_bytes_, p, take);
    pending_bytes_ += take;
    p += take;
    n -= take;
    if (pending_bytes_ < 32) return;
    Stripes(lanes_, pending_, 32);
    pending_bytes_ = 0;
  }
  const size_t taken = Stripes(lanes_, p, n);
  std::memcpy(pending_, p + taken, n - taken);
  pending_bytes_ = n - taken;
}

uint64_t Xxh64::Digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = Rotl(lanes_[0], 1) + Rotl(lanes_[1], 7) + Rotl(lanes_[2], 12) + Rotl(lanes_[3], 18);
    for (uint64_t lane : lanes_) h = Merge(h, lane);
  } else {
    h = kP5;  // seed 0
  }
  h += total_;
  const unsigned char* p = pending_;
  size_t n = pending_bytes_;
  for (; n >= 8; n -= 8, p += 8) h = Rotl(h ^ Round(0, Load64(p)), 27) * kP1 + kP4;
  if (n >= 4) {
    h = Rotl(h ^ (static_cast<uint64_t>(Load32(p)) * kP1), 23) * kP2 + kP3;
    n -= 4;
    p += 4;
  }
  for (; n > 0; --n, ++p) h = Rotl(h ^ (*p * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

uint64_t Xxh64Of(const void* data, size_t n) {
  Xxh64 h;
  h.Update(data, n);
  return h.Digest();
}

}  // namespace trellis::train
