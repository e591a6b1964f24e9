// What it costs a rank to open its corpus: the time of ReadCorpus (every
// check, the checksum included) and the memory it leaves the rank holding,
// private (anonymous: no other process can share it and the kernel cannot
// drop it) against file pages (the page cache, shared by every rank of the
// node that maps the file, and reclaimable). One JSON object on standard
// output; bench/data/corpus_open.sh runs several at once and tables them.
//   corpus_open CORPUS [--data-root DIR]
#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "trainer_core/data/corpus.h"
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The time and memory of opening a corpus"};
  std::string path, root;
  app.add_option("corpus", path, "corpus file (trellis-corpus)")->required();
  app.add_option("--data-root", root, "open it as a rank does, under this data root");
  CLI11_PARSE(app, argc, argv);
  try {
    const auto start = std::chrono::steady_clock::now();
    const Corpus corpus = root.empty() ? ReadCorpus(path) : ReadCorpus(path, {root});
    const double open_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    nlohmann::ordered_json out = {
        {"tokens", corpus.tokens.size()},
        {"documents", corpus.doc_starts.size()},
        {"open_s", open_s},
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
