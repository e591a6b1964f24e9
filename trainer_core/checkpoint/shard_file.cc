#include "trainer_core/checkpoint/shard_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "trainer_core/data/corpus.h"
#include "trainer_core/error.h"

namespace trellis::train {
namespace {

constexpr uint64_t kHeaderBytes = 24;         // magic, version, entry count, index bytes
constexpr uint64_t kPieceBytes = 4ull << 20;  // read, then checksummed while in the cache

template <typename T>
void Put(std::string* out, T v) {
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

uint64_t IndexBytes(const std::vector<ShardEntry>& entries) {
  uint64_t n = 0;
  for (const auto& e : entries) n += 4 + e.name.size() + 8 + 8 * e.dims.size() + 24;
  return n;
}

std::string EncodeIndex(const std::vector<ShardEntry>& entries) {
  std::string index;
  for (const auto& e : entries) {
    Put<uint32_t>(&index, static_cast<uint32_t>(e.name.size()));
    index += e.name;
    Put<uint32_t>(&index, static_cast<uint32_t>(e.dtype));
    Put<uint32_t>(&index, static_cast<uint32_t>(e.dims.size()));
    for (int64_t d : e.dims) Put<int64_t>(&index, d);
    Put<uint64_t>(&index, e.offset);
    Put<uint64_t>(&index, e.bytes);
    Put<uint64_t>(&index, e.checksum);
  }
  return index;
}

// Throws what `file` says failed, naming the file and errno's text.
void Check(bool written, const AtomicFileWriter& file) {
  if (!written) throw TrainError(file.error());
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
  AtomicFileWriter file(path, 0666, TempName::kDotTmp);  // fopen's mode, as before
  Check(file.Write(text) && file.Commit(), file);
}

// ---- writing ----

ShardWriter::ShardWriter(const std::string& path, std::vector<ShardEntry> entries)
    : entries_(std::move(entries)), file_(path, 0644, TempName::kDotTmp) {
  Check(file_.ok(), file_);
  const uint64_t data_start = kHeaderBytes + IndexBytes(entries_) + 8;
  uint64_t offset = data_start;
  for (auto& e : entries_) {
    e.offset = offset;
    offset += e.bytes;
  }
  file_bytes_ = offset;
  // Room for the header and the index: Finish writes them once the checksums are known.
  Check(file_.Write(std::string(data_start, '\0')), file_);
  CloseFilledEntries();
}

void ShardWriter::CloseFilledEntries() {
  for (; current_ < entries_.size() && written_ == entries_[current_].bytes; ++current_) {
    entries_[current_].checksum = hash_.Digest();
    hash_ = Xxh64();
    written_ = 0;
  }
}

void ShardWriter::Append(const void* data, uint64_t n) {
  auto p = static_cast<const char*>(data);
  while (n > 0) {
    if (current_ == entries_.size())
      throw TrainError(file_.temp_path() + ": more bytes appended than the entries declare");
    const uint64_t take = std::min(n, entries_[current_].bytes - written_);
    hash_.Update(p, take);
    Check(file_.Write(p, take), file_);
    written_ += take;
    p += take;
    n -= take;
    CloseFilledEntries();
  }
}

uint64_t ShardWriter::Finish() {
  if (current_ != entries_.size())
    throw TrainError(file_.temp_path() + ": tensor '" + entries_[current_].name + "' got " +
                     std::to_string(written_) + " of its " +
                     std::to_string(entries_[current_].bytes) + " bytes");
  std::string head(kShardMagic, 8);
  Put<uint32_t>(&head, kShardVersion);
  Put<uint32_t>(&head, static_cast<uint32_t>(entries_.size()));
  const std::string index = EncodeIndex(entries_);
  Put<uint64_t>(&head, index.size());
  head += index;
  const uint64_t index_checksum = Xxh64Of(index.data(), index.size());
  Put<uint64_t>(&head, index_checksum);
  Check(file_.WriteAt(0, head.data(), head.size()) && file_.Commit(), file_);
  return index_checksum;
}

// ---- reading ----

ShardReader::ShardReader(const std::string& path) : path_(path) {
  auto fail = [&](const std::string& why) {
    throw TrainError("checkpoint shard " + path + ": " + why);
  };
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(fd_, &st) != 0) fail(std::string("cannot stat: ") + std::strerror(errno));
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ < kHeaderBytes + 8) fail("truncated (" + std::to_string(size_) + " bytes)");
  char header[kHeaderBytes];
  ReadAt(0, header, kHeaderBytes);
  if (std::memcmp(header, kShardMagic, 8) != 0) fail("not a checkpoint shard (bad magic)");
  Cursor head(std::string_view(header + 8, kHeaderBytes - 8), path_);
  version_ = head.Take<uint32_t>();
  const auto count = head.Take<uint32_t>();
  const auto index_bytes = head.Take<uint64_t>();
  if (version_ != 1 && version_ != kShardVersion)
    fail("unsupported version " + std::to_string(version_) + " (this build reads 1 and " +
         std::to_string(kShardVersion) + ")");
  if (index_bytes > size_ - kHeaderBytes - 8) fail("truncated (the index runs past the end)");
  std::string index(index_bytes + 8, '\0');
  ReadAt(kHeaderBytes, index.data(), index.size());
  std::memcpy(&index_checksum_, index.data() + index_bytes, 8);
  index.resize(index_bytes);
  const uint64_t computed =
      version_ == 1 ? Fnv1a(index.data(), index.size()) : Xxh64Of(index.data(), index.size());
  if (computed != index_checksum_) fail("corrupt index (checksum mismatch)");
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
    if (e.offset > size_ || e.bytes > size_ - e.offset)
      fail("truncated: tensor '" + e.name + "' runs past the end of the file");
    entries_.push_back(std::move(e));
  }
  if (!c.done()) fail("corrupt index (unread bytes)");
}

ShardReader::~ShardReader() {
  if (fd_ >= 0) ::close(fd_);
}

const ShardEntry* ShardReader::Find(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

void ShardReader::ReadAt(uint64_t offset, void* out, uint64_t n) const {
  auto p = static_cast<char*>(out);
  for (uint64_t done = 0; done < n;) {
    const ssize_t got = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      throw TrainError("checkpoint shard " + path_ + ": read failed: " + std::strerror(errno));
    if (got == 0)
      throw TrainError("checkpoint shard " + path_ + ": truncated (ends at byte " +
                       std::to_string(offset + done) + ")");
    done += static_cast<uint64_t>(got);
  }
  bytes_read_ += n;
}

void ShardReader::Read(const ShardEntry& e, void* out) const {
  EntryReader reader(*this, e);
  // In pieces that stay in the cache between the read and the checksum.
  for (char* p = static_cast<char*>(out); reader.left() > 0;) {
    const uint64_t n = std::min<uint64_t>(reader.left(), kPieceBytes);
    reader.Next(p, n);
    p += n;
  }
  reader.Verify();
}

std::string ShardReader::ReadBytes(const ShardEntry& e) const {
  std::string bytes(e.bytes, '\0');
  Read(e, bytes.data());
  return bytes;
}

uint64_t ShardReader::WholeFileFnv1a() const {
  std::vector<char> piece(kPieceBytes);
  uint64_t h = Fnv1a(nullptr, 0);
  for (uint64_t at = 0; at < size_; at += piece.size()) {
    const uint64_t n = std::min<uint64_t>(piece.size(), size_ - at);
    ReadAt(at, piece.data(), n);
    h = Fnv1a(piece.data(), n, h);
  }
  return h;
}

EntryReader::EntryReader(const ShardReader& shard, const ShardEntry& e)
    : shard_(shard), entry_(e), fnv_(Fnv1a(nullptr, 0)) {}

void EntryReader::Next(void* out, uint64_t n) {
  if (n > left())
    throw TrainError("checkpoint shard " + shard_.path() + ": tensor '" + entry_.name +
                     "' has " + std::to_string(left()) + " bytes left, " + std::to_string(n) +
                     " asked for");
  shard_.ReadAt(entry_.offset + done_, out, n);
  if (shard_.version() == 1)
    fnv_ = Fnv1a(out, n, fnv_);
  else
    xxh_.Update(out, n);
  done_ += n;
}

void EntryReader::Verify() const {
  const uint64_t sum = shard_.version() == 1 ? fnv_ : xxh_.Digest();
  if (left() != 0 || sum != entry_.checksum)
    throw TrainError("checkpoint shard " + shard_.path() + ": tensor '" + entry_.name +
                     "' is corrupt (checksum mismatch)");
}

}  // namespace trellis::train
