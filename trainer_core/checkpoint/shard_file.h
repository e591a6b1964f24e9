#pragma once
// One checkpoint shard: named raw arrays behind a self-checking index.
// Layout (little-endian), documented in trainer_core/README.md:
//   0   char[8] magic "TRLSCKPT"
//   8   u32     version (2; 1 is still read)
//   12  u32     number of entries E
//   16  u64     index bytes I
//   24  index   E x {u32 name length, name, u32 dtype, u32 ndim, i64 dims[ndim],
//                    u64 data offset, u64 data bytes, u64 checksum of the data}
//   24+I u64    checksum of the index
//   ..  data    each entry's bytes at its offset
// Checksums are XXH64 in version 2, FNV-1a 64 in version 1. The index holds
// every entry's checksum, so the index's checksum (which the manifest records)
// stands for the whole file: a shard is verified in the one pass that reads
// it, entry by entry, and only the entries a rank needs are read.
// Torch-free: the checkpoint code converts tensors to and from entries.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/atomic_file_writer.h"
#include "trainer_core/checkpoint/xxhash64.h"

namespace trellis::train {

inline constexpr char kShardMagic[8] = {'T', 'R', 'L', 'S', 'C', 'K', 'P', 'T'};
inline constexpr uint32_t kShardVersion = 2;

enum class DType : uint32_t { kF32 = 1, kF64 = 2, kBF16 = 3, kI64 = 4 };
const char* DTypeName(DType t);

struct ShardEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;
  uint64_t offset = 0, bytes = 0, checksum = 0;  // offset and checksum: set by the writer
};

// Writes a shard in one pass without holding it in memory: every entry is
// declared up front (name, type, dims, bytes), then the entries' bytes are
// appended in that order, in pieces of any size, each piece checksummed as
// it is written. Finish writes the index, fsyncs and renames `path`.tmp
// into place (common/atomic_file_writer.h). Throws TrainError; an unfinished
// shard's .tmp is removed.
class ShardWriter {
 public:
  ShardWriter(const std::string& path, std::vector<ShardEntry> entries);
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void Append(const void* data, uint64_t n);
  // Returns the index's checksum (recorded in the manifest).
  uint64_t Finish();
  uint64_t file_bytes() const { return file_bytes_; }

 private:
  // Closes the current entry once all its bytes are in, and any empty ones after it.
  void CloseFilledEntries();

  std::vector<ShardEntry> entries_;
  AtomicFileWriter file_;
  size_t current_ = 0;     // the entry being appended
  uint64_t written_ = 0;   // of the current entry
  uint64_t file_bytes_ = 0;
  Xxh64 hash_;
};

// Opens a shard and reads and verifies its header and index; entries are read
// on demand. Every failure throws TrainError naming the file and, where it
// applies, the entry.
class ShardReader {
 public:
  explicit ShardReader(const std::string& path);
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t size() const { return size_; }
  // What a version-2 manifest records for the shard.
  uint64_t index_checksum() const { return index_checksum_; }
  const std::vector<ShardEntry>& entries() const { return entries_; }
  const ShardEntry* Find(std::string_view name) const;
  // Bytes read from the file so far (header and index included).
  uint64_t bytes_read() const { return bytes_read_; }

  // The whole entry into `out` (e.bytes of host memory), verified.
  void Read(const ShardEntry& e, void* out) const;
  std::string ReadBytes(const ShardEntry& e) const;
  // FNV-1a 64 of the whole file: what version-1 manifests record for a shard.
  // One more pass over the file; only resuming an old checkpoint needs it.
  uint64_t WholeFileFnv1a() const;

 private:
  friend class EntryReader;
  void ReadAt(uint64_t offset, void* out, uint64_t n) const;

  std::string path_;
  int fd_ = -1;
  uint32_t version_ = 0;
  uint64_t size_ = 0, index_checksum_ = 0;
  std::vector<ShardEntry> entries_;
  mutable uint64_t bytes_read_ = 0;
};

// One entry read front to back in pieces (into staging memory, say), its
// checksum accumulated on the way; Verify once all of it has been read.
class EntryReader {
 public:
  EntryReader(const ShardReader& shard, const ShardEntry& e);
  uint64_t left() const { return entry_.bytes - done_; }
  // Reads the next n bytes (at most left()) into `out`.
  void Next(void* out, uint64_t n);
  // Throws TrainError (naming the file and the tensor) when the bytes read
  // differ from those written.
  void Verify() const;

 private:
  const ShardReader& shard_;
  const ShardEntry& entry_;
  uint64_t done_ = 0;
  Xxh64 xxh_;
  uint64_t fnv_;
};

// Writes `text` to `path`.tmp, fsyncs it, renames it into place and fsyncs
// the directory (common/atomic_file_writer.h): after it returns the file is
// either whole or absent. Throws TrainError naming the file.
void WriteFileAtomically(const std::string& path, std::string_view text);

}  // namespace trellis::train
