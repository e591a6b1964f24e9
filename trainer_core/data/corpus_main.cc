// trellis-corpus build OUT.bin FILE_OR_DIR...   byte-level corpus from text files
// trellis-corpus info FILE.bin                  verify a corpus and print its size
// trellis-corpus upgrade IN.bin OUT.bin         rewrite a corpus in the current format
// trellis-corpus merge OUT.bin IN.bin...        several corpora as one, in that order
//                                               (data/corpus_merge.h)
// trellis-corpus import-megatron OUT.bin PREFIX VOCAB
//                                               a Megatron-LM indexed dataset
//                                               (PREFIX.idx, PREFIX.bin) as a corpus
// trellis-corpus synthetic OUT.bin VOCAB TOKENS [SEED [DOC_TOKENS]]
//                                               synthetic text (data/synthetic.h): one
//                                               document, or documents of DOC_TOKENS
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "trainer_core/data/corpus.h"
#include "trainer_core/data/corpus_merge.h"
#include "trainer_core/data/megatron_import.h"
#include "trainer_core/data/synthetic.h"
#include "trainer_core/error.h"

namespace {

// To stderr with exit 2 for a wrong command line; to stdout with 0 when asked (--help).
int Usage(bool asked = false) {
  std::fprintf(asked ? stdout : stderr,
               "usage: trellis-corpus build OUT.bin FILE_OR_DIR...\n"
               "       trellis-corpus info FILE.bin\n"
               "       trellis-corpus upgrade IN.bin OUT.bin\n"
               "       trellis-corpus merge OUT.bin IN.bin...\n"
               "       trellis-corpus import-megatron OUT.bin PREFIX VOCAB\n"
               "       trellis-corpus synthetic OUT.bin VOCAB TOKENS [SEED [DOC_TOKENS]]\n"
               "example: trellis-corpus build licenses.corpus /usr/share/common-licenses\n");
  return asked ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace trellis::train;
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h"))
    return Usage(/*asked=*/true);
  if (argc < 3) return Usage();
  const std::string verb = argv[1];
  try {
    if (verb == "build" && argc >= 4) {
      BuildStats stats;
      Corpus c = BuildByteCorpus(std::vector<std::string>(argv + 3, argv + argc), &stats);
      WriteCorpus(argv[2], c);
      std::printf("%s: %zu tokens, %zu documents (%ld files used, %ld skipped as binary/empty)\n",
                  argv[2], c.tokens.size(), c.doc_starts.size(),
                  static_cast<long>(stats.files_used), static_cast<long>(stats.files_skipped));
      return 0;
    }
    if (verb == "synthetic" && argc >= 5 && argc <= 7) {
      // Whole numbers only: strtoull alone would take "-1" and "12abc".
      const auto whole = [](const char* s, unsigned long long* v) {
        char* end = nullptr;
        errno = 0;
        *v = std::strtoull(s, &end, 10);
        return *s >= '0' && *s <= '9' && *end == '\0' && errno == 0;
      };
      unsigned long long vocab = 0, tokens = 0, seed = 1234, doc_tokens = 0;
      if (!whole(argv[3], &vocab) || !whole(argv[4], &tokens) ||
          (argc >= 6 && !whole(argv[5], &seed)) || (argc == 7 && !whole(argv[6], &doc_tokens)) ||
          vocab < 2 || vocab > trellis::kCorpusMaxVocab || tokens < 2 || tokens > (1ull << 40) ||
          doc_tokens == 1 || doc_tokens > tokens) {
        std::fprintf(stderr,
                     "trellis-corpus: VOCAB in [2, 2^24] (ids of 4 bytes above 65536), "
                     "TOKENS in [2, 2^40], SEED >= 0, "
                     "DOC_TOKENS 0 (one document) or in [2, TOKENS]\n");
        return 2;
      }
      const Corpus c =
          SyntheticCorpus(static_cast<uint32_t>(vocab), static_cast<int64_t>(tokens), seed,
                          static_cast<int64_t>(doc_tokens));
      WriteCorpus(argv[2], c);
      std::printf("%s: %llu tokens, %zu document%s, vocab %llu\n", argv[2], tokens,
                  c.doc_starts.size(), c.doc_starts.size() == 1 ? "" : "s", vocab);
      return 0;
    }
    if (verb == "info" && argc == 3) {
      Corpus c = ReadCorpus(argv[2]);
      std::printf("%s: ok, format version %u, vocab %u, %zu tokens, %zu documents, "
                  "checksum %016llx\n",
                  argv[2], c.version, c.vocab, c.tokens.size(), c.doc_starts.size(),
                  static_cast<unsigned long long>(c.checksum));
      return 0;
    }
    if (verb == "merge" && argc >= 4) {
      const MergedCorpus m =
          MergeCorpora(std::vector<std::string>(argv + 3, argv + argc), argv[2]);
      std::printf("%s: %llu tokens, %llu documents from %zu corpora, vocab %u, checksum %016llx\n",
                  argv[2], static_cast<unsigned long long>(m.tokens),
                  static_cast<unsigned long long>(m.documents), m.sources.size(), m.vocab,
                  static_cast<unsigned long long>(m.checksum));
      for (const MergedSource& s : m.sources)
        std::printf("  %s: %llu tokens (%.1f%%), %llu documents, vocab %u\n", s.path.c_str(),
                    static_cast<unsigned long long>(s.tokens), 100.0 * s.tokens / m.tokens,
                    static_cast<unsigned long long>(s.documents), s.vocab);
      return 0;
    }
    if (verb == "import-megatron" && argc == 5) {
      char* end = nullptr;
      const unsigned long long vocab = std::strtoull(argv[4], &end, 10);
      if (*argv[4] < '0' || *argv[4] > '9' || *end != '\0' || vocab < 2 ||
          vocab > trellis::kCorpusMaxVocab) {
        std::fprintf(stderr, "trellis-corpus: VOCAB in [2, 2^24] (the tokenizer's, which a "
                             "Megatron dataset does not record)\n");
        return 2;
      }
      const MegatronImport r = ImportMegatron(argv[3], static_cast<uint32_t>(vocab), argv[2]);
      std::printf("%s: %llu tokens, %llu documents (%llu empty, left out) of %llu sequences, "
                  "vocab %llu, checksum %016llx\n",
                  argv[2], static_cast<unsigned long long>(r.tokens),
                  static_cast<unsigned long long>(r.documents - r.empty_documents),
                  static_cast<unsigned long long>(r.empty_documents),
                  static_cast<unsigned long long>(r.sequences), vocab,
                  static_cast<unsigned long long>(r.checksum));
      return 0;
    }
    if (verb == "upgrade" && argc == 4) {
      const Corpus c = ReadCorpus(argv[2]);
      WriteCorpus(argv[3], c);
      const Corpus written = ReadCorpus(argv[3]);
      // A version-2 file rewritten keeps its checksum. A version-1 file gets a
      // new one; a checkpoint made on it is still recognised, by its
      // version-1 checksum, computed once at that resume (trainer.cc).
      const bool same = c.checksum == written.checksum;
      std::printf("%s: format version %u -> %u, the same %zu tokens and %zu documents, checksum "
                  "%016llx -> %016llx%s\n",
                  argv[3], c.version, written.version, written.tokens.size(),
                  written.doc_starts.size(), static_cast<unsigned long long>(c.checksum),
                  static_cast<unsigned long long>(written.checksum),
                  same ? " (unchanged: runs resume on it)"
                       : " (runs resume on it: a checkpoint made on the old file is known "
                         "by its old checksum, computed once, at that resume)");
      return 0;
    }
  } catch (const TrainError& e) {
    std::fprintf(stderr, "trellis-corpus: %s\n", e.what());
    return 1;
  }
  return Usage();
}
