#include "trainer_core/export/safetensors.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "trainer_core/error.h"

namespace trellis::train {

int64_t StTensor::Bytes() const {
  int64_t n = 4;  // both dtypes are 4 bytes
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<StTensor> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), tmp_(path + ".tmp"), tensors_(std::move(tensors)) {
  nlohmann::ordered_json header;
  header["__metadata__"] = metadata;
  std::set<std::string> names;
  int64_t at = 0;
  for (const auto& t : tensors_) {
    if (!names.insert(t.name).second) throw TrainError(path + ": duplicate tensor " + t.name);
    header[t.name] = {{"dtype", t.dtype == StDtype::kF32 ? "F32" : "I32"},
                      {"shape", t.shape},
                      {"data_offsets", {at, at + t.Bytes()}}};
    at += t.Bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (!file_) throw TrainError(tmp_ + ": cannot create");
  uint64_t len = text.size();  // little-endian hosts only (x86-64, aarch64)
  if (std::fwrite(&len, 8, 1, file_) != 1 || std::fwrite(text.data(), 1, len, file_) != len)
    throw TrainError(tmp_ + ": write failed");
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_) {
    std::fclose(file_);
    std::remove(tmp_.c_str());
  }
}

void SafetensorsWriter::Write(const void* data, int64_t bytes) {
  if (next_ >= tensors_.size() || bytes != tensors_[next_].Bytes())
    throw TrainError(path_ + ": tensor written out of order or with the wrong size");
  if (std::fwrite(data, 1, bytes, file_) != static_cast<size_t>(bytes))
    throw TrainError(tmp_ + ": write failed (disk full?)");
  ++next_;
}

void SafetensorsWriter::Finish() {
  if (next_ != tensors_.size()) throw TrainError(path_ + ": not every tensor was written");
  const bool ok = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw TrainError(path_ + ": cannot finish the file");
}

}  // namespace trellis::train
