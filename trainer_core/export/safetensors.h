#pragma once
// A streaming writer of the safetensors format (what PyTorch, JAX and the
// Hugging Face tools load): u64 little-endian header length, a JSON header
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
// {string: string}} padded with spaces to 8 bytes, then the tensors' bytes in
// header order. The header is fixed before any data is written, so tensors of
// many gigabytes are written one at a time without holding the file in
// memory. It appears under its name whole, and durable, or not at all:
// written to `path`.tmp, fsynced and renamed (common/atomic_file_writer.h).
// Torch-free.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/atomic_file_writer.h"

namespace trellis::train {

enum class StDtype { kF32, kI32, kBF16 };

struct StTensor {
  std::string name;
  StDtype dtype;
  std::vector<int64_t> shape;
  int64_t Bytes() const;
};

// fp32 to bf16 (its upper half), rounded to the nearest even; NaN stays NaN.
uint16_t Bf16Bits(float value);

class SafetensorsWriter {
 public:
  // Writes the header to `path` (a temporary name until Finish). Throws
  // TrainError on I/O errors (naming the file and errno's text) or duplicate
  // names. A writer destroyed before Finish removes its temporary file.
  SafetensorsWriter(const std::string& path, std::vector<StTensor> tensors,
                    const std::map<std::string, std::string>& metadata);
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  // The next tensor's bytes, in header order; exactly its size.
  void Write(const void* data, int64_t bytes);
  // Checks every tensor was written, fsyncs and renames into place.
  void Finish();

 private:
  std::string path_;
  std::vector<StTensor> tensors_;
  AtomicFileWriter file_;
  size_t next_ = 0;
};

}  // namespace trellis::train
