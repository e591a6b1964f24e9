#include "common/step_record.h"

#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

namespace trellis {
namespace {

using Json = nlohmann::json;

template <typename T>
void PutOptional(Json* j, const char* key, const std::optional<T>& v) {
  if (v) (*j)[key] = *v;
}

// Reads a non-negative finite number (or any finite number when `signed_ok`).
bool ReadDouble(const Json& j, const char* key, double* out, bool signed_ok, std::string* error) {
  const auto& v = j.at(key);
  if (!v.is_number()) {
    *error = std::string(key) + ": must be a number";
    return false;
  }
  double d = v.get<double>();
  if (!std::isfinite(d) || (!signed_ok && d < 0)) {
    *error = std::string(key) + (signed_ok ? ": must be finite" : ": must be finite and >= 0");
    return false;
  }
  *out = d;
  return true;
}

bool ReadCount(const Json& j, const char* key, int64_t* out, std::string* error) {
  const auto& v = j.at(key);
  if (!v.is_number_integer() || (v.is_number_integer() && v.get<int64_t>() < 0)) {
    *error = std::string(key) + ": must be an integer >= 0";
    return false;
  }
  *out = v.get<int64_t>();
  return true;
}

bool CheckCount(const char* key, int64_t v, std::string* error) {
  if (v >= 0) return true;
  *error = std::string(key) + ": must be an integer >= 0";
  return false;
}

bool CheckTime(const char* key, double v, std::string* error) {
  if (std::isfinite(v) && v >= 0) return true;
  *error = std::string(key) + ": must be finite and >= 0";
  return false;
}

}  // namespace

bool CheckStepRecord(const StepRecord& r, std::string* error) {
  if (!CheckCount("step", r.step, error) || !CheckCount("tokens", r.tokens, error) ||
      !CheckTime("step_seconds", r.step_seconds, error))
    return false;
  if (!std::isfinite(r.loss)) {
    *error = "loss: must be finite";
    return false;
  }
  const std::pair<const char*, const std::optional<double>*> doubles[] = {
      {"grad_norm", &r.grad_norm},         {"fwd_seconds", &r.fwd_seconds},
      {"bwd_seconds", &r.bwd_seconds},     {"optim_seconds", &r.optim_seconds},
      {"comm_seconds", &r.comm_seconds},   {"exposed_comm_seconds", &r.exposed_comm_seconds},
      {"expert_load_max_over_mean", &r.expert_load_max_over_mean},
      {"ep_load_max_over_mean", &r.ep_load_max_over_mean},
      {"checkpoint_seconds", &r.checkpoint_seconds}};
  for (const auto& [key, v] : doubles)
    if (*v && !CheckTime(key, **v, error)) return false;
  const std::pair<const char*, const std::optional<int64_t>*> counts[] = {
      {"alloc_retries", &r.alloc_retries},
      {"mem_allocated_peak_bytes", &r.mem_allocated_peak_bytes},
      {"mem_reserved_peak_bytes", &r.mem_reserved_peak_bytes},
      {"mem_allocated_peak_fwd_bytes", &r.mem_allocated_peak_fwd_bytes},
      {"mem_allocated_peak_bwd_bytes", &r.mem_allocated_peak_bwd_bytes},
      {"mem_allocated_peak_optim_bytes", &r.mem_allocated_peak_optim_bytes},
      {"host_arena_bytes", &r.host_arena_bytes},
      {"nccl_max_ctas", &r.nccl_max_ctas},
      {"checkpoint_step", &r.checkpoint_step}};
  for (const auto& [key, v] : counts)
    if (*v && !CheckCount(key, **v, error)) return false;
  return true;
}

std::string EncodeStepRecord(const StepRecord& r) {
  Json j;
  j["v"] = kStepRecordVersion;
  j["step"] = r.step;
  j["loss"] = r.loss;
  j["tokens"] = r.tokens;
  j["step_seconds"] = r.step_seconds;
  PutOptional(&j, "grad_norm", r.grad_norm);
  PutOptional(&j, "fwd_seconds", r.fwd_seconds);
  PutOptional(&j, "bwd_seconds", r.bwd_seconds);
  PutOptional(&j, "optim_seconds", r.optim_seconds);
  PutOptional(&j, "comm_seconds", r.comm_seconds);
  PutOptional(&j, "exposed_comm_seconds", r.exposed_comm_seconds);
  PutOptional(&j, "expert_load_max_over_mean", r.expert_load_max_over_mean);
  PutOptional(&j, "ep_load_max_over_mean", r.ep_load_max_over_mean);
  PutOptional(&j, "alloc_retries", r.alloc_retries);
  PutOptional(&j, "mem_allocated_peak_bytes", r.mem_allocated_peak_bytes);
  PutOptional(&j, "mem_reserved_peak_bytes", r.mem_reserved_peak_bytes);
  PutOptional(&j, "mem_allocated_peak_fwd_bytes", r.mem_allocated_peak_fwd_bytes);
  PutOptional(&j, "mem_allocated_peak_bwd_bytes", r.mem_allocated_peak_bwd_bytes);
  PutOptional(&j, "mem_allocated_peak_optim_bytes", r.mem_allocated_peak_optim_bytes);
  PutOptional(&j, "host_arena_bytes", r.host_arena_bytes);
  PutOptional(&j, "nccl_max_ctas", r.nccl_max_ctas);
  PutOptional(&j, "checkpoint_step", r.checkpoint_step);
  PutOptional(&j, "checkpoint_seconds", r.checkpoint_seconds);
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
  for (const char* key : {"step", "loss", "tokens", "step_seconds"}) {
    if (!j.contains(key)) {
      *error = std::string(key) + ": is required";
      return std::nullopt;
    }
  }
  StepRecord r;
  if (!ReadCount(j, "step", &r.step, error) || !ReadDouble(j, "loss", &r.loss, true, error) ||
      !ReadCount(j, "tokens", &r.tokens, error) ||
      !ReadDouble(j, "step_seconds", &r.step_seconds, false, error)) {
    return std::nullopt;
  }
  struct DoubleField {
    const char* key;
    std::optional<double>* out;
  };
  struct CountField {
    const char* key;
    std::optional<int64_t>* out;
  };
  const DoubleField doubles[] = {{"grad_norm", &r.grad_norm},
                                 {"fwd_seconds", &r.fwd_seconds},
                                 {"bwd_seconds", &r.bwd_seconds},
                                 {"optim_seconds", &r.optim_seconds},
                                 {"comm_seconds", &r.comm_seconds},
                                 {"exposed_comm_seconds", &r.exposed_comm_seconds},
                                 {"expert_load_max_over_mean", &r.expert_load_max_over_mean},
                                 {"ep_load_max_over_mean", &r.ep_load_max_over_mean},
                                 {"checkpoint_seconds", &r.checkpoint_seconds}};
  const CountField counts[] = {{"alloc_retries", &r.alloc_retries},
                               {"mem_allocated_peak_bytes", &r.mem_allocated_peak_bytes},
                               {"mem_reserved_peak_bytes", &r.mem_reserved_peak_bytes},
                               {"mem_allocated_peak_fwd_bytes", &r.mem_allocated_peak_fwd_bytes},
                               {"mem_allocated_peak_bwd_bytes", &r.mem_allocated_peak_bwd_bytes},
                               {"mem_allocated_peak_optim_bytes",
                                &r.mem_allocated_peak_optim_bytes},
                               {"host_arena_bytes", &r.host_arena_bytes},
                               {"nccl_max_ctas", &r.nccl_max_ctas},
                               {"checkpoint_step", &r.checkpoint_step}};
  size_t known = 5;
  for (const auto& f : doubles) {
    if (!j.contains(f.key)) continue;
    double d;
    if (!ReadDouble(j, f.key, &d, false, error)) return std::nullopt;
    *f.out = d;
    ++known;
  }
  for (const auto& f : counts) {
    if (!j.contains(f.key)) continue;
    int64_t c;
    if (!ReadCount(j, f.key, &c, error)) return std::nullopt;
    *f.out = c;
    ++known;
  }
  if (known != j.size()) {
    for (const auto& [key, value] : j.items()) {
      bool ok = key == "v" || key == "step" || key == "loss" || key == "tokens" ||
                key == "step_seconds";
      for (const auto& f : doubles) ok = ok || key == f.key;
      for (const auto& f : counts) ok = ok || key == f.key;
      if (!ok) {
        *error = key + ": unknown field (the step record contract lists the accepted ones)";
        return std::nullopt;
      }
    }
  }
  return r;
}

}  // namespace trellis
