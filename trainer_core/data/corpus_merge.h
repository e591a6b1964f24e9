#pragma once
// Several corpora as one, for a run that trains on more than one source: the
// documents of each input in the order given, ids unchanged. A file named
// twice counts twice, which is how a source is weighted up (rows are drawn
// from the whole, so each source's share of the steps is its share of the
// tokens). The inputs must come from the same tokenizer: nothing here can
// tell. The vocab is the largest of theirs; ids widen to u32 where it is over
// 65536. Every input is read as a rank reads it (all its checks), mapped;
// the output streams through CorpusWriter. Torch-free.

#include <cstdint>
#include <string>
#include <vector>

namespace trellis::train {

struct MergedSource {
  std::string path;
  uint64_t tokens = 0, documents = 0;
  uint32_t vocab = 0;
};

struct MergedCorpus {
  uint64_t tokens = 0, documents = 0;
  uint32_t vocab = 0;
  uint64_t checksum = 0;  // of the corpus written
  std::vector<MergedSource> sources;
};

// Throws TrainError (or RefusedInput) naming the input and what is wrong;
// `out` is then left as it was. `out` may be one of the inputs.
MergedCorpus MergeCorpora(const std::vector<std::string>& inputs, const std::string& out);

}  // namespace trellis::train
