// What it costs a rank to open its corpus: the time of ReadCorpus (every
// check, the checksum included) and the memory it leaves the rank holding,
// private (anonymous: no other process can share it and the kernel cannot
// drop it) against file pages (the page cache, shared by every rank of the
// node that maps the file, and reclaimable). One JSON object on standard
// output; bench/data/corpus_open.sh runs several at once and tables them.
//   corpus_open CORPUS [--data-root DIR]
//   corpus_open CORPUS --write-version-one OUT   (the same corpus in the old
//                                                 format, to compare with)
#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "trainer_core/data/corpus.h"
#include "trainer_core/data/corpus_chunks.h"
#include "trainer_core/error.h"

using namespace trellis::train;

namespace {

// A "Vm..."/"Rss..." line of /proc/self/status, in bytes (-1 if absent).
int64_t StatusBytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, key.size() + 1, key + ":") == 0)
      return std::stoll(line.substr(key.size() + 1)) * 1024;  // "NNN kB"
  return -1;
}

// The corpus as a version-1 file (trainer_core/data/corpus.h): a 40-byte
// header, its FNV-1a checksum, the boundaries, the u16 ids. Only the bench
// writes it: trellis-corpus writes version 2.
void WriteVersionOne(const Corpus& c, const std::string& out) {
  const std::optional<uint64_t> checksum = VersionOneChecksum(c);
  if (!checksum) throw TrainError("version 1 holds u16 ids only; this corpus's vocab is wider");
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  const uint32_t version = 1, vocab = c.vocab;
  const uint64_t tokens = c.tokens.size(), documents = c.doc_starts.size();
  f.write(trellis::kCorpusMagic, 8);
  for (const auto& [p, n] : {std::pair<const void*, size_t>{&version, 4}, {&vocab, 4},
                             {&tokens, 8}, {&documents, 8}, {&*checksum, 8},
                             {c.doc_starts.data(), 8 * documents},
                             {c.tokens.data(), c.tokens.bytes()}})
    f.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
  if (!f.flush()) throw TrainError("cannot write " + out);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The time and memory of opening a corpus"};
  std::string path, root;
  app.add_option("corpus", path, "corpus file (trellis-corpus)")->required();
  app.add_option("--data-root", root, "open it as a rank does, under this data root");
  std::string version_one;
  app.add_option("--write-version-one", version_one,
                 "write the corpus to this file in format version 1, and time nothing");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!version_one.empty()) {
      WriteVersionOne(ReadCorpus(path), version_one);
      return 0;
    }
    const auto start = std::chrono::steady_clock::now();
    const Corpus corpus = root.empty() ? ReadCorpus(path) : ReadCorpus(path, {root});
    const double open_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    nlohmann::ordered_json out = {
        {"tokens", corpus.tokens.size()},
        {"documents", corpus.doc_starts.size()},
        {"open_s", open_s},
        // Version 1's checksum runs on one thread.
        {"check_threads", corpus.version >= 2 ? CorpusCheckThreads() : 1},
        {"peak_rss_bytes", StatusBytes("VmHWM")},
        {"private_bytes", StatusBytes("RssAnon")},
        {"file_pages_bytes", StatusBytes("RssFile")}};
    std::cout << out.dump() << "\n";
  } catch (const TrainError& e) {
    std::cerr << "corpus_open: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
