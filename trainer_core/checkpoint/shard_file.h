#pragma once
// One checkpoint shard: named raw arrays behind a self-checking index.
// Layout (little-endian), documented in trainer_core/README.md:
//   0   char[8] magic "TRLSCKPT"
//   8   u32     version (1)
//   12  u32     number of entries E
//   16  u64     index bytes I
//   24  index   E x {u32 name length, name, u32 dtype, u32 ndim, i64 dims[ndim],
//                    u64 data offset, u64 data bytes, u64 FNV-1a 64 of the data}
//   24+I u64    FNV-1a 64 of the index
//   ..  data    each entry's bytes at its offset
// Torch-free: the checkpoint code converts tensors to and from entries.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trellis::train {

inline constexpr char kShardMagic[8] = {'T', 'R', 'L', 'S', 'C', 'K', 'P', 'T'};
inline constexpr uint32_t kShardVersion = 1;

enum class DType : uint32_t { kF32 = 1, kF64 = 2, kBF16 = 3, kI64 = 4 };
const char* DTypeName(DType t);

struct ShardEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;
  uint64_t offset = 0, bytes = 0, checksum = 0;
};

// Writes to `path`.tmp, fsyncs, renames into place. Throws TrainError.
// The data pointers must stay valid until Write returns.
class ShardWriter {
 public:
  void Add(std::string name, DType dtype, std::vector<int64_t> dims, const void* data,
           uint64_t bytes);
  // Returns the FNV-1a 64 of the whole file (recorded in the manifest).
  uint64_t Write(const std::string& path);

 private:
  std::vector<ShardEntry> entries_;
  std::vector<const void*> data_;
};

// Reads and verifies a whole shard. Every failure throws TrainError naming the
// file and, where it applies, the entry. Given the whole file's checksum as
// the manifest recorded it, a file that matches skips the per-tensor
// checksums (the same bytes were checked when written): one pass over the
// bytes instead of two. A file that does not match still has every tensor
// checked, so that the error can name the corrupt one.
class ShardReader {
 public:
  explicit ShardReader(const std::string& path,
                       std::optional<uint64_t> expected_file_checksum = std::nullopt);
  const std::string& path() const { return path_; }
  const std::vector<ShardEntry>& entries() const { return entries_; }
  const ShardEntry* Find(std::string_view name) const;
  std::string_view Data(const ShardEntry& e) const;
  uint64_t file_checksum() const { return file_checksum_; }
  uint64_t size() const { return bytes_.size(); }

 private:
  std::string path_;
  std::string bytes_;
  std::vector<ShardEntry> entries_;
  uint64_t file_checksum_ = 0;
};

// Writes `text` to `path`.tmp, fsyncs it, renames it into place and fsyncs
// the directory: after it returns the file is either whole or absent.
void WriteFileAtomically(const std::string& path, std::string_view text);

}  // namespace trellis::train
