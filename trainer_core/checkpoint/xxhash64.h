#pragma once
// XXH64 (seed 0), the checksum of checkpoint shards from version 2 on: it
// reads 32 bytes a round in four independent lanes, so it runs at memory
// speed where FNV-1a (one byte a multiply) ran at about 1 GB/s and was most of
// a resume. Written from the published algorithm; the values of the reference
// implementation are checked in shard_file_test.cc.

#include <cstddef>
#include <cstdint>

namespace trellis::train {

// The hash of bytes given in pieces of any size: the same as of the whole.
class Xxh64 {
 public:
  Xxh64();
  void Update(const void* data, size_t n);
  uint64_t Digest() const;

 private:
  uint64_t lanes_[4];
  uint64_t total_ = 0;
  unsigned char pending_[32];  // the bytes of an unfinished 32-byte round
  size_t pending_bytes_ = 0;
};

uint64_t Xxh64Of(const void* data, size_t n);

}  // namespace trellis::train
