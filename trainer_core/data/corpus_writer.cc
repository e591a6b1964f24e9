#include "trainer_core/data/corpus_writer.h"

#include "trainer_core/data/corpus_chunks.h"
#include "trainer_core/error.h"

namespace trellis::train {

CorpusWriter::CorpusWriter(const std::string& path, uint32_t vocab, uint64_t tokens,
                           std::vector<uint64_t> doc_starts)
    : path_(path),
      header_(VersionTwoHeader(vocab, tokens, doc_starts.size(), kCorpusChunkTokens)),
      doc_starts_(std::move(doc_starts)),
      file_(path, 0666, TempName::kDotTmp) {  // an ofstream's mode, as before
  chunk_sums_.reserve(header_.chunks);
  // The header and chunk checksums are written again at the end.
  Check(file_.Write(HeaderBytes(header_).data(), header_.header_bytes));
  Check(file_.Write(doc_starts_.data(), 8 * doc_starts_.size()));
  const std::vector<uint64_t> placeholder(header_.chunks, 0);
  Check(file_.Write(placeholder.data(), 8 * placeholder.size()));
}

void CorpusWriter::Check(bool written) const {
  if (!written) throw TrainError("corpus " + file_.error());
}

void CorpusWriter::Append(const void* ids, uint64_t count) {
  if (written_ + count > header_.tokens)
    throw TrainError("corpus " + path_ + ": more than the " + std::to_string(header_.tokens) +
                     " tokens announced");
  const auto* bytes = static_cast<const char*>(ids);
  const uint64_t width = static_cast<uint64_t>(token_bytes());
  Check(file_.Write(bytes, count * width));
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
  Check(file_.WriteAt(header_.ChunkSumsAt(), chunk_sums_.data(), 8 * chunk_sums_.size()));
  Check(file_.WriteAt(0, HeaderBytes(header_).data(), header_.header_bytes));
  Check(file_.Commit());
  return header_.checksum;
}

}  // namespace trellis::train
