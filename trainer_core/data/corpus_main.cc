// trellis-corpus build OUT.bin FILE_OR_DIR...   byte-level corpus from text files
// trellis-corpus info FILE.bin                  verify a corpus and print its size
// trellis-corpus synthetic OUT.bin VOCAB TOKENS [SEED]
//                                               one synthetic document (data/synthetic.h)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "trainer_core/data/corpus.h"
#include "trainer_core/data/synthetic.h"
#include "trainer_core/error.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: trellis-corpus build OUT.bin FILE_OR_DIR...\n"
               "       trellis-corpus info FILE.bin\n"
               "       trellis-corpus synthetic OUT.bin VOCAB TOKENS [SEED]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace trellis::train;
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
    if (verb == "synthetic" && (argc == 5 || argc == 6)) {
      char* end = nullptr;
      const long long vocab = std::strtoll(argv[3], &end, 10);
      const bool vocab_ok = *end == '\0';
      const long long tokens = std::strtoll(argv[4], &end, 10);
      const bool tokens_ok = *end == '\0';
      const unsigned long long seed = argc == 6 ? std::strtoull(argv[5], &end, 10) : 1234;
      if (!vocab_ok || !tokens_ok || *end != '\0' || vocab < 2 || vocab > 65536 || tokens < 2) {
        std::fprintf(stderr, "trellis-corpus: VOCAB in [2, 65536], TOKENS >= 2, SEED >= 0\n");
        return 2;
      }
      WriteCorpus(argv[2], SyntheticCorpus(static_cast<uint32_t>(vocab), tokens, seed));
      std::printf("%s: %lld tokens, 1 document, vocab %lld\n", argv[2], tokens, vocab);
      return 0;
    }
    if (verb == "info" && argc == 3) {
      Corpus c = ReadCorpus(argv[2]);
      std::printf("%s: ok, vocab %u, %zu tokens, %zu documents, fnv1a64 %016llx\n", argv[2],
                  c.vocab, c.tokens.size(), c.doc_starts.size(),
                  static_cast<unsigned long long>(c.checksum));
      return 0;
    }
  } catch (const TrainError& e) {
    std::fprintf(stderr, "trellis-corpus: %s\n", e.what());
    return 1;
  }
  return Usage();
}
