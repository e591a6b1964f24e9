#include "trainer_core/export/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "trainer_core/error.h"

namespace trellis::train {

uint16_t Bf16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // a quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1);  // round half to even
  return static_cast<uint16_t>(bits >> 16);
}

int64_t StTensor::Bytes() const {
  int64_t n = dtype == StDtype::kBF16 ? 2 : 4;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<StTensor> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), tensors_(std::move(tensors)), file_(path, 0666, TempName::kDotTmp) {
  nlohmann::ordered_json header;
  header["__metadata__"] = metadata;
  std::set<std::string> names;
  int64_t at = 0;
  for (const auto& t : tensors_) {
    if (!names.insert(t.name).second) throw TrainError(path + ": duplicate tensor " + t.name);
    const char* dtype =
        t.dtype == StDtype::kF32 ? "F32" : t.dtype == StDtype::kI32 ? "I32" : "BF16";
    header[t.name] = {{"dtype", dtype},
                      {"shape", t.shape},
                      {"data_offsets", {at, at + t.Bytes()}}};
    at += t.Bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t len = text.size();  // little-endian hosts only (x86-64, aarch64)
  if (!file_.Write(&len, 8) || !file_.Write(text)) throw TrainError(file_.error());
}

void SafetensorsWriter::Write(const void* data, int64_t bytes) {
  if (next_ >= tensors_.size() || bytes != tensors_[next_].Bytes())
    throw TrainError(path_ + ": tensor written out of order or with the wrong size");
  if (!file_.Write(data, static_cast<size_t>(bytes))) throw TrainError(file_.error());
  ++next_;
}

void SafetensorsWriter::Finish() {
  if (next_ != tensors_.size()) throw TrainError(path_ + ": not every tensor was written");
  if (!file_.Commit()) throw TrainError(file_.error());
}

}  // namespace trellis::train
