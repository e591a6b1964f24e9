#include "trainer_core/checkpoint/shard_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "trainer_core/data/corpus.h"
#include "trainer_core/error.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

template <typename T>
void Append(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Bounds-checked reads from the index; running off the end is corruption.
class Cursor {
 public:
  Cursor(std::string_view data, const std::string& path) : data_(data), path_(path) {}
  template <typename T>
  T Take() {
    T v;
    std::memcpy(&v, Bytes(sizeof(T)).data(), sizeof(T));
    return v;
  }
  std::string_view Bytes(size_t n) {
    if (n > data_.size() - pos_)
      throw TrainError("checkpoint shard " + path_ + ": corrupt index (runs past its end)");
    auto out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  bool done() const { return pos_ == data_.size(); }

 private:
  std::string_view data_;
  const std::string& path_;
  size_t pos_ = 0;
};

void SyncPath(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "float32";
    case DType::kF64:
      return "float64";
    case DType::kBF16:
      return "bfloat16";
    case DType::kI64:
      return "int64";
  }
  return "unknown";
}

void WriteFileAtomically(const std::string& path, std::string_view text) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw TrainError(tmp + ": cannot create: " + std::strerror(errno));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
            ::fsync(fileno(f)) == 0;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) throw TrainError(tmp + ": write failed: " + std::strerror(errno));
  RenamePath(tmp, path);
  SyncPath(DirName(path), O_RDONLY | O_DIRECTORY);
}

void ShardWriter::Add(std::string name, DType dtype, std::vector<int64_t> dims, const void* data,
                      uint64_t bytes) {
  ShardEntry e{std::move(name), dtype, std::move(dims)};
  e.bytes = bytes;
  e.checksum = Fnv1a(data, bytes);
  entries_.push_back(std::move(e));
  data_.push_back(data);
}

uint64_t ShardWriter::Write(const std::string& path) {
  // The index size is known before the offsets: compute it first.
  uint64_t index_bytes = 0;
  for (const auto& e : entries_) index_bytes += 4 + e.name.size() + 8 + 8 * e.dims.size() + 24;
  uint64_t offset = 24 + index_bytes + 8;
  std::string index;
  for (auto& e : entries_) {
    e.offset = offset;
    offset += e.bytes;
    Append<uint32_t>(&index, static_cast<uint32_t>(e.name.size()));
    index += e.name;
    Append<uint32_t>(&index, static_cast<uint32_t>(e.dtype));
    Append<uint32_t>(&index, static_cast<uint32_t>(e.dims.size()));
    for (int64_t d : e.dims) Append<int64_t>(&index, d);
    Append<uint64_t>(&index, e.offset);
    Append<uint64_t>(&index, e.bytes);
    Append<uint64_t>(&index, e.checksum);
  }
  std::string out(kShardMagic, 8);
  Append<uint32_t>(&out, kShardVersion);
  Append<uint32_t>(&out, static_cast<uint32_t>(entries_.size()));
  Append<uint64_t>(&out, index.size());
  out += index;
  Append<uint64_t>(&out, Fnv1a(index.data(), index.size()));
  for (size_t i = 0; i < entries_.size(); ++i)
    out.append(static_cast<const char*>(data_[i]), entries_[i].bytes);
  WriteFileAtomically(path, out);
  return Fnv1a(out.data(), out.size());
}

ShardReader::ShardReader(const std::string& path, std::optional<uint64_t> expected_file_checksum)
    : path_(path) {
  auto fail = [&](const std::string& why) {
    throw TrainError("checkpoint shard " + path + ": " + why);
  };
  // Straight into a buffer of the file's size: a stream copy of a shard of
  // gigabytes costs seconds of a restart.
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw TrainError("checkpoint shard " + path + ": cannot open");
  const std::streamoff size = in.tellg();
  if (size < 0) fail("cannot tell its size");
  bytes_.resize(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(bytes_.data(), size))
    fail("read failed after " + std::to_string(in.gcount()) + " of " + std::to_string(size) +
         " bytes");
  file_checksum_ = Fnv1a(bytes_.data(), bytes_.size());
  const bool file_as_recorded =
      expected_file_checksum && *expected_file_checksum == file_checksum_;
  if (bytes_.size() < 32) fail("truncated (" + std::to_string(bytes_.size()) + " bytes)");
  if (std::memcmp(bytes_.data(), kShardMagic, 8) != 0) fail("not a checkpoint shard (bad magic)");
  Cursor head(std::string_view(bytes_).substr(8, 16), path_);
  auto version = head.Take<uint32_t>();
  auto count = head.Take<uint32_t>();
  auto index_bytes = head.Take<uint64_t>();
  if (version != kShardVersion)
    fail("unsupported version " + std::to_string(version) + " (this build reads " +
         std::to_string(kShardVersion) + ")");
  if (index_bytes > bytes_.size() - 32) fail("truncated (the index runs past the end)");
  std::string_view index = std::string_view(bytes_).substr(24, index_bytes);
  uint64_t stored;
  std::memcpy(&stored, bytes_.data() + 24 + index_bytes, 8);
  if (Fnv1a(index.data(), index.size()) != stored) fail("corrupt index (checksum mismatch)");
  Cursor c(index, path_);
  for (uint32_t i = 0; i < count; ++i) {
    ShardEntry e;
    e.name = std::string(c.Bytes(c.Take<uint32_t>()));
    e.dtype = static_cast<DType>(c.Take<uint32_t>());
    e.dims.resize(c.Take<uint32_t>());
    for (auto& d : e.dims) d = c.Take<int64_t>();
    e.offset = c.Take<uint64_t>();
    e.bytes = c.Take<uint64_t>();
    e.checksum = c.Take<uint64_t>();
    if (e.offset > bytes_.size() || e.bytes > bytes_.size() - e.offset)
      fail("truncated: tensor '" + e.name + "' runs past the end of the file");
    if (!file_as_recorded && Fnv1a(bytes_.data() + e.offset, e.bytes) != e.checksum)
      fail("tensor '" + e.name + "' is corrupt (checksum mismatch)");
    entries_.push_back(std::move(e));
  }
  if (!c.done()) fail("corrupt index (unread bytes)");
}

const ShardEntry* ShardReader::Find(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::string_view ShardReader::Data(const ShardEntry& e) const {
  return std::string_view(bytes_).substr(e.offset, e.bytes);
}

}  // namespace trellis::train
