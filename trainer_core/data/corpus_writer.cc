#include "trainer_core/data/corpus_writer.h"

#include <cstdio>

#include "trainer_core/data/corpus_chunks.h"
#include "trainer_core/error.h"
#include "trainer_core/files.h"

namespace trellis::train {

CorpusWriter::CorpusWriter(const std::string& path, uint32_t vocab, uint64_t tokens,
                           std::vector<uint64_t> doc_starts)
    : path_(path),
      tmp_(path + ".tmp"),
      header_(VersionTwoHeader(vocab, tokens, doc_starts.size(), kCorpusChunkTokens)),
      doc_starts_(std::move(doc_starts)),
      out_(tmp_, std::ios::binary | std::ios::trunc) {
  if (!out_) throw TrainError("corpus " + tmp_ + ": cannot create");
  chunk_sums_.reserve(header_.chunks);
  // The header and chunk checksums are written again at the end.
  Put(HeaderBytes(header_).data(), header_.header_bytes);
  Put(doc_starts_.data(), 8 * doc_starts_.size());
  const std::vector<uint64_t> placeholder(header_.chunks, 0);
  Put(placeholder.data(), 8 * placeholder.size());
}

CorpusWriter::~CorpusWriter() {
  if (finished_) return;
  out_.close();
  std::remove(tmp_.c_str());
}

void CorpusWriter::Put(const void* data, uint64_t bytes) {
  if (!out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes)))
    throw TrainError("corpus " + tmp_ + ": write failed");
}

void CorpusWriter::Append(const void* ids, uint64_t count) {
  if (written_ + count > header_.tokens)
    throw TrainError("corpus " + path_ + ": more than the " + std::to_string(header_.tokens) +
                     " tokens announced");
  const auto* bytes = static_cast<const char*>(ids);
  const uint64_t width = static_cast<uint64_t>(token_bytes());
  Put(bytes, count * width);
  for (uint64_t done = 0; done < count;) {
    const uint64_t take = std::min(count - done, kCorpusChunkTokens - in_chunk_);
    chunk_.Update(bytes + done * width, take * width);
    done += take;
    in_chunk_ += take;
    if (in_chunk_ == kCorpusChunkTokens) {
      chunk_sums_.push_back(chunk_.Digest());
      chunk_ = Xxh64();
      in_chunk_ = 0;
    }
  }
  written_ += count;
}

uint64_t CorpusWriter::Finish() {
  if (written_ != header_.tokens)
    throw TrainError("corpus " + path_ + ": " + std::to_string(written_) + " tokens given of the " +
                     std::to_string(header_.tokens) + " announced");
  if (in_chunk_ > 0) chunk_sums_.push_back(chunk_.Digest());
  header_.checksum = CorpusIdentity(doc_starts_.data(), doc_starts_.size(), chunk_sums_.data(),
                                    chunk_sums_.size());
  out_.seekp(static_cast<std::streamoff>(header_.ChunkSumsAt()));
  Put(chunk_sums_.data(), 8 * chunk_sums_.size());
  out_.seekp(0);
  Put(HeaderBytes(header_).data(), header_.header_bytes);
  if (!out_.flush()) throw TrainError("corpus " + tmp_ + ": write failed");
  out_.close();
  RenamePath(tmp_, path_);
  finished_ = true;
  return header_.checksum;
}

}  // namespace trellis::train
