#pragma once
// A Megatron-LM indexed dataset (PREFIX.idx and PREFIX.bin, as its
// preprocess_data.py writes them with any tokenizer) rewritten as a Trellis
// corpus, so that data already tokenized for Megatron trains here as it is.
// The .idx: "MMIDIDX\0\0", u64 version 1, u8 dtype code, u64 sequence count
// S, u64 document-index count, i32 lengths[S], i64 byte offsets[S], i64
// document indices (0, then the end sequence of each document). Each
// document becomes one corpus document; its sequences' tokens follow each
// other. Integer ids only (dtype codes 1-5 and 8); each must lie in
// [0, vocab). Streams: a dataset larger than memory imports. Torch-free.

#include <cstdint>
#include <string>

namespace trellis::train {

struct MegatronImport {
  uint64_t sequences = 0, documents = 0, empty_documents = 0, tokens = 0;
  uint64_t checksum = 0;  // of the corpus written
};

// Throws RefusedInput naming the file and what is wrong, TrainError when a
// file cannot be read or written; `out` is then left as it was.
MegatronImport ImportMegatron(const std::string& prefix, uint32_t vocab, const std::string& out);

}  // namespace trellis::train
