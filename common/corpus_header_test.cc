#include "common/corpus_header.h"

#include <gtest/gtest.h>

#include <random>

namespace trellis {
namespace {

// A header's bytes, followed by the size it implies, parse back to it.
TEST(CorpusHeaderTest, VersionTwoHeadersRoundTrip) {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 100; ++i) {
    const uint64_t tokens = 1 + rng() % 100000, documents = 1 + rng() % tokens;
    CorpusHeader h = VersionTwoHeader(2 + static_cast<uint32_t>(rng() % 200000), tokens,
                                      documents, 1 + rng() % 5000);
    h.checksum = rng();
    CorpusHeader back;
    ASSERT_EQ(ParseCorpusHeader(HeaderBytes(h).data(), h.FileBytes(), &back), "");
    EXPECT_EQ(back.vocab, h.vocab);
    EXPECT_EQ(back.tokens, tokens);
    EXPECT_EQ(back.documents, documents);
    EXPECT_EQ(back.checksum, h.checksum);
    EXPECT_EQ(back.chunk_tokens, h.chunk_tokens);
    EXPECT_EQ(back.chunks, (tokens + h.chunk_tokens - 1) / h.chunk_tokens);
    EXPECT_EQ(back.TokensAt(), 48 + 8 * documents + 8 * back.chunks);
    EXPECT_EQ(back.FileBytes(), back.TokensAt() + (h.vocab > 65536 ? 4 : 2) * tokens);
  }
}

TEST(CorpusHeaderTest, EachWrongFieldIsNamed) {
  const CorpusHeader good = VersionTwoHeader(256, 1000, 3, 100);
  auto parse = [](CorpusHeader h, uint64_t size, const std::string& bytes = "") {
    CorpusHeader out;
    std::string head = bytes.empty() ? HeaderBytes(h) : bytes;
    head.resize(kCorpusHeaderBytesV2);
    return ParseCorpusHeader(head.data(), size, &out);
  };
  EXPECT_EQ(parse(good, good.FileBytes()), "");
  EXPECT_EQ(parse(good, 39), "truncated: 39 bytes, shorter than the header");
  EXPECT_EQ(parse(good, 44), "truncated: 44 bytes, shorter than the header");
  EXPECT_EQ(parse(good, good.FileBytes() - 1),
            "truncated: " + std::to_string(good.FileBytes() - 1) + " bytes, the header implies " +
                std::to_string(good.FileBytes()));
  EXPECT_EQ(parse(good, good.FileBytes() + 2).rfind("trailing bytes: ", 0), 0u);
  EXPECT_EQ(parse(good, 100, std::string(48, 'x')), "not a corpus file (bad magic)");
  CorpusHeader h = good;
  h.version = 3;
  EXPECT_EQ(parse(h, 100), "unsupported version 3 (this build reads 1 and 2)");
  h = good;
  h.vocab = (1 << 24) + 1;
  EXPECT_EQ(parse(h, h.FileBytes()), "vocab 16777217 out of range (version 2 takes 2 to 16777216)");
  h.vocab = 65537;  // ids of 4 bytes
  EXPECT_EQ(parse(h, 48 + 8 * 3 + 8 * 10 + 4 * 1000), "");
  h = good;
  h.documents = 1001;
  EXPECT_EQ(parse(h, h.FileBytes()), "header claims 1000 tokens and 1001 documents");
  h = good;
  h.chunk_tokens = 0;
  EXPECT_EQ(parse(h, 100), "header claims 0 tokens per chunk (accepted: 1 to 2^40)");
  // Version 1: 40 bytes of header, no chunk size, no chunk checksums.
  h = good;
  h.version = 1;
  h.chunk_tokens = h.chunks = 0;
  h.header_bytes = kCorpusHeaderBytesV1;
  CorpusHeader v1;
  std::string bytes = HeaderBytes(h);
  ASSERT_EQ(bytes.size(), kCorpusHeaderBytesV1);
  bytes.resize(kCorpusHeaderBytesV2);
  ASSERT_EQ(ParseCorpusHeader(bytes.data(), 40 + 8 * 3 + 2 * 1000, &v1), "");
  EXPECT_EQ(v1.TokensAt(), 40u + 8 * 3);
  h.vocab = 65537;  // version 1 has no wide ids
  bytes = HeaderBytes(h);
  bytes.resize(kCorpusHeaderBytesV2);
  EXPECT_EQ(ParseCorpusHeader(bytes.data(), 40 + 8 * 3 + 4 * 1000, &v1),
            "vocab 65537 out of range (version 1 takes 2 to 65536)");
}

}  // namespace
}  // namespace trellis
