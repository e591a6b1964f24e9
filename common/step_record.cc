#include "common/step_record.h"

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace trellis {
namespace {

using Json = nlohmann::json;

// The range of a field's kind, as a message naming the field.
std::string RangeError(const StepField& f) {
  std::string key(f.name);
  switch (f.kind) {
    case StepFieldKind::kCount:
      return key + ": must be an integer >= 0";
    case StepFieldKind::kSeconds:
      return key + ": must be finite and >= 0";
    case StepFieldKind::kFinite:
      return key + ": must be finite";
  }
  return key;
}

bool InRange(const StepField& f, double v) {
  return std::isfinite(v) && (f.kind == StepFieldKind::kFinite || v >= 0);
}

// Checks one present field of `r`.
bool CheckField(const StepField& f, const StepRecord& r, std::string* error) {
  bool ok = true;
  if (f.is_count()) {
    if (auto v = f.get_int(r)) ok = *v >= 0;
  } else if (auto v = f.get_double(r)) {
    ok = InRange(f, *v);
  }
  if (!ok) *error = RangeError(f);
  return ok;
}

// Reads the field's JSON value into `r`, checking its type and range.
bool ReadField(const StepField& f, const Json& v, StepRecord* r, std::string* error) {
  if (f.is_count()) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      *error = RangeError(f);
      return false;
    }
    f.set_int(r, v.get<int64_t>());
    return true;
  }
  if (!v.is_number()) {
    *error = std::string(f.name) + ": must be a number";
    return false;
  }
  double d = v.get<double>();
  if (!InRange(f, d)) {
    *error = RangeError(f);
    return false;
  }
  f.set_double(r, d);
  return true;
}

}  // namespace

const StepField* FindStepField(std::string_view name) {
  for (const StepField& f : kStepFields)
    if (f.name == name) return &f;
  return nullptr;
}

bool CheckStepRecord(const StepRecord& r, std::string* error) {
  for (const StepField& f : kStepFields)
    if (!CheckField(f, r, error)) return false;
  return true;
}

std::string EncodeStepRecord(const StepRecord& r) {
  Json j;
  j["v"] = kStepRecordVersion;
  for (const StepField& f : kStepFields) {
    const std::string key(f.name);
    if (f.is_count()) {
      if (auto v = f.get_int(r)) j[key] = *v;
    } else if (auto v = f.get_double(r)) {
      j[key] = *v;
    }
  }
  return j.dump();
}

std::optional<StepRecord> DecodeStepRecord(std::string_view line, std::string* error) {
  if (line.size() > kMaxStepRecordBytes) {
    *error = "record is " + std::to_string(line.size()) + " bytes; the limit is " +
             std::to_string(kMaxStepRecordBytes);
    return std::nullopt;
  }
  Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    *error = "record must be one JSON object per line";
    return std::nullopt;
  }
  if (!j.contains("v") || !j["v"].is_number_integer() || j["v"].get<int64_t>() != 1) {
    *error = "v: must be 1 (the step record version this worker reads)";
    return std::nullopt;
  }
  for (const StepField& f : kStepFields) {
    if (f.required && !j.contains(std::string(f.name))) {
      *error = std::string(f.name) + ": is required";
      return std::nullopt;
    }
  }
  StepRecord r;
  size_t known = 1;  // "v"
  for (const StepField& f : kStepFields) {
    auto it = j.find(std::string(f.name));
    if (it == j.end()) continue;
    if (!ReadField(f, *it, &r, error)) return std::nullopt;
    ++known;
  }
  if (known != j.size()) {
    for (const auto& [key, value] : j.items()) {
      if (key != "v" && FindStepField(key) == nullptr) {
        *error = key + ": unknown field (the step record contract lists the accepted ones)";
        return std::nullopt;
      }
    }
  }
  return r;
}

}  // namespace trellis
