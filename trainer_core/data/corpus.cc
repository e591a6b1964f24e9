#include "trainer_core/data/corpus.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "trainer_core/error.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

constexpr size_t kHeaderBytes = 40;
constexpr uint64_t kFnvPrime = 0x100000001B3ull;

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void Append(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

std::string ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TrainError(std::string(what) + " " + path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

uint64_t PayloadChecksum(const Corpus& c) {
  uint64_t h = Fnv1a(c.doc_starts.data(), c.doc_starts.size() * sizeof(uint64_t));
  return Fnv1a(c.tokens.data(), c.tokens.size() * sizeof(uint16_t), h);
}

// PayloadChecksum, and the largest token in `*max_token`, in one pass over
// the tokens: a large corpus is read from disk once.
uint64_t ChecksumAndLargestToken(const Corpus& c, uint16_t* max_token) {
  uint64_t h = Fnv1a(c.doc_starts.data(), c.doc_starts.size() * sizeof(uint64_t));
  const auto* bytes = reinterpret_cast<const unsigned char*>(c.tokens.data());
  uint16_t largest = 0;
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    h = (h ^ bytes[2 * i]) * kFnvPrime;
    h = (h ^ bytes[2 * i + 1]) * kFnvPrime;
    largest = std::max(largest, c.tokens[i]);
  }
  *max_token = largest;
  return h;
}

bool LooksLikeText(const std::string& path, const std::string& head) {
  for (const char* ext : {".gz", ".xz", ".bz2", ".zst"})
    if (path.size() > std::strlen(ext) &&
        path.compare(path.size() - std::strlen(ext), std::string::npos, ext) == 0)
      return false;
  return head.find('\0') == std::string::npos;
}

}  // namespace

uint64_t Fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

Corpus OwnedCorpus(uint32_t vocab, std::vector<uint16_t> tokens, std::vector<uint64_t> doc_starts) {
  struct Vectors {
    std::vector<uint16_t> tokens;
    std::vector<uint64_t> doc_starts;
  };
  auto owned = std::make_shared<Vectors>(Vectors{std::move(tokens), std::move(doc_starts)});
  Corpus c;
  c.vocab = vocab;
  c.tokens = ConstSpan<uint16_t>(owned->tokens.data(), owned->tokens.size());
  c.doc_starts = ConstSpan<uint64_t>(owned->doc_starts.data(), owned->doc_starts.size());
  c.backing = std::move(owned);
  c.checksum = PayloadChecksum(c);
  return c;
}

Corpus ReadCorpus(const std::string& path, const std::vector<std::string>& data_roots) {
  const std::shared_ptr<const MappedFile> file =
      MapFileUnderRoots(path, data_roots, data_roots.empty() ? "corpus" : "training.data: corpus");
  const size_t size = file->size();
  // The file was read: what is wrong with it is wrong on every node.
  auto fail = [&](const std::string& why) { throw RefusedInput("corpus " + path + ": " + why); };
  if (size < kHeaderBytes)
    fail("truncated: " + std::to_string(size) + " bytes, shorter than the header");
  const char* p = file->data();
  if (std::memcmp(p, kCorpusMagic, 8) != 0) fail("not a corpus file (bad magic)");
  uint32_t version = Load<uint32_t>(p + 8);
  if (version != kCorpusVersion)
    fail("unsupported version " + std::to_string(version) + " (this build reads " +
         std::to_string(kCorpusVersion) + ")");
  Corpus c;
  c.vocab = Load<uint32_t>(p + 12);
  uint64_t n = Load<uint64_t>(p + 16), d = Load<uint64_t>(p + 24);
  c.checksum = Load<uint64_t>(p + 32);
  if (c.vocab < 2 || c.vocab > 65536) fail("vocab " + std::to_string(c.vocab) + " out of range");
  if (n > (uint64_t{1} << 40) || d > n)
    fail("header claims " + std::to_string(n) + " tokens and " + std::to_string(d) + " documents");
  uint64_t want = kHeaderBytes + 8 * d + 2 * n;
  if (size != want)
    fail((size < want ? "truncated: " : "trailing bytes: ") + std::to_string(size) +
         " bytes, the header implies " + std::to_string(want));
  // The boundaries start at byte 40 and the tokens after them: both aligned
  // for their type in a page-aligned mapping.
  c.doc_starts = ConstSpan<uint64_t>(reinterpret_cast<const uint64_t*>(p + kHeaderBytes), d);
  c.tokens = ConstSpan<uint16_t>(reinterpret_cast<const uint16_t*>(p + kHeaderBytes + 8 * d), n);
  c.backing = file;
  file->ReadInOrder(true);
  uint16_t max_token = 0;
  const uint64_t checksum = ChecksumAndLargestToken(c, &max_token);
  file->ReadInOrder(false);  // training reads rows here and there
  if (checksum != c.checksum) fail("checksum mismatch: the file is corrupt");
  if (n == 0 || d == 0) fail("empty corpus");
  if (c.doc_starts[0] != 0) fail("the first document must start at token 0");
  for (uint64_t i = 1; i < d; ++i)
    if (c.doc_starts[i] <= c.doc_starts[i - 1] || c.doc_starts[i] >= n)
      fail("document " + std::to_string(i) + " starts at " + std::to_string(c.doc_starts[i]) +
           ": boundaries must increase and lie below " + std::to_string(n));
  if (max_token >= c.vocab)
    for (uint64_t i = 0; i < n; ++i)
      if (c.tokens[i] >= c.vocab)
        fail("token " + std::to_string(i) + " is " + std::to_string(c.tokens[i]) +
             ", not below the vocab size " + std::to_string(c.vocab));
  return c;
}

void WriteCorpus(const std::string& path, const Corpus& corpus) {
  std::string out(kCorpusMagic, 8);
  Append<uint32_t>(&out, kCorpusVersion);
  Append<uint32_t>(&out, corpus.vocab);
  Append<uint64_t>(&out, corpus.tokens.size());
  Append<uint64_t>(&out, corpus.doc_starts.size());
  Append<uint64_t>(&out, PayloadChecksum(corpus));
  out.append(reinterpret_cast<const char*>(corpus.doc_starts.data()),
             corpus.doc_starts.size() * sizeof(uint64_t));
  out.append(reinterpret_cast<const char*>(corpus.tokens.data()),
             corpus.tokens.size() * sizeof(uint16_t));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f.write(out.data(), static_cast<std::streamsize>(out.size())) || !f.flush())
      throw TrainError("corpus " + tmp + ": write failed");
  }
  RenamePath(tmp, path);
}

std::vector<uint16_t> ByteTokenize(const std::string& text) {
  return std::vector<uint16_t>(reinterpret_cast<const unsigned char*>(text.data()),
                               reinterpret_cast<const unsigned char*>(text.data()) + text.size());
}

Corpus BuildByteCorpus(const std::vector<std::string>& inputs, BuildStats* stats) {
  std::vector<std::string> files;
  for (const auto& in : inputs) {
    if (IsDirectory(in)) {
      auto found = ListFilesRecursive(in);
      files.insert(files.end(), found.begin(), found.end());
    } else if (IsRegularFile(in)) {
      files.push_back(in);
    } else {
      throw TrainError("input " + in + ": not a file or directory");
    }
  }
  std::vector<uint16_t> tokens;
  std::vector<uint64_t> doc_starts;
  for (const auto& f : files) {
    std::string text = ReadFile(f, "input");
    if (text.empty() || !LooksLikeText(f, text.substr(0, 4096))) {
      ++stats->files_skipped;
      continue;
    }
    ++stats->files_used;
    doc_starts.push_back(tokens.size());
    auto ids = ByteTokenize(text);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
  }
  if (tokens.empty()) throw TrainError("no text found in the inputs");
  return OwnedCorpus(kByteVocab, std::move(tokens), std::move(doc_starts));
}

}  // namespace trellis::train
