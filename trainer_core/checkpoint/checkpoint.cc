#include "trainer_core/checkpoint/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "trainer_core/checkpoint/shard_file.h"
#include "trainer_core/error.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

using Json = nlohmann::json;

const char* kShardName = "shard-00000-of-00001.bin";

// The spec fields a checkpoint must agree with to be resumed.
Json SpecIdentity(const spec::TrainerSpec& s) {
  const auto& m = s.model;
  return {{"model.layers", m.layers},
          {"model.hidden", m.hidden},
          {"model.heads", m.heads},
          {"model.kv_heads", m.kv_heads},
          {"model.experts", m.experts},
          {"model.experts_per_token", m.experts_per_token},
          {"model.expert_hidden", m.expert_hidden},
          {"model.vocab", m.vocab},
          {"model.shared_expert", m.shared_expert},
          {"model.rope_theta", m.rope_theta},
          {"model.norm_eps", m.norm_eps},
          {"training.seq_len", s.training.seq_len},
          {"training.global_batch", s.training.global_batch},
          {"training.seed", s.training.seed}};
}

DType ToDType(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat:
      return DType::kF32;
    case torch::kDouble:
      return DType::kF64;
    case torch::kBFloat16:
      return DType::kBF16;
    case torch::kLong:
      return DType::kI64;
    default:
      throw TrainError("checkpoint: unsupported tensor dtype");
  }
}

std::string Shape(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

Json ReadManifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw TrainError("checkpoint manifest " + path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    throw TrainError("checkpoint manifest " + path + ": not valid JSON (truncated or corrupt)");
  if (j.value("format", "") != "trellis-checkpoint")
    throw TrainError("checkpoint manifest " + path + ": not a trellis checkpoint manifest");
  if (j.value("version", -1) != kCheckpointVersion)
    throw TrainError("checkpoint manifest " + path + ": unsupported version " +
                     j.value("version", Json()).dump() + " (this build reads " +
                     std::to_string(kCheckpointVersion) + ")");
  return j;
}

void CheckSpec(const Json& manifest, const spec::TrainerSpec& spec, const std::string& path) {
  const Json want = SpecIdentity(spec);
  const Json& have = manifest.at("spec");
  std::string mismatches;
  for (const auto& [key, value] : want.items()) {
    if (have.contains(key) && have.at(key) == value) continue;
    if (!mismatches.empty()) mismatches += "; ";
    mismatches += key + " is " + (have.contains(key) ? have.at(key).dump() : "absent") +
                  " in the checkpoint, " + value.dump() + " in the spec";
  }
  if (!mismatches.empty())
    throw TrainError("checkpoint " + path + " does not match the spec: " + mismatches);
}

// Steps with a manifest, newest first.
std::vector<int64_t> CompleteSteps(const std::string& dir) {
  std::vector<int64_t> steps;
  for (const auto& name : ListDir(dir)) {
    long step;
    char tail;
    if (std::sscanf(name.c_str(), "step-%ld%c", &step, &tail) == 1 &&
        PathExists(JoinPath(JoinPath(dir, name), "manifest.json")))
      steps.push_back(step);
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

void Prune(const std::string& dir, int keep) {
  auto complete = CompleteSteps(dir);
  for (size_t i = keep; i < complete.size(); ++i) RemoveTree(StepDir(dir, complete[i]));
}

}  // namespace

std::string StepDir(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08ld", static_cast<long>(step));
  return JoinPath(dir, name);
}

int64_t LatestCompleteStep(const std::string& dir) {
  auto complete = CompleteSteps(dir);
  return complete.empty() ? -1 : complete.front();
}

void SaveCheckpoint(const std::string& dir, const spec::TrainerSpec& spec,
                    const CheckpointMeta& meta, const NamedTensors& state, int keep) {
  const std::string step_dir = StepDir(dir, meta.step);
  MakeDirs(step_dir);
  std::remove(JoinPath(step_dir, "manifest.json").c_str());  // re-saving a step starts incomplete

  ShardWriter writer;
  std::vector<torch::Tensor> host;  // keeps the bytes alive until Write
  for (const auto& [name, t] : state) {
    host.push_back(t.detach().to(torch::kCPU).contiguous());
    const auto& h = host.back();
    writer.Add(name, ToDType(h.scalar_type()), h.sizes().vec(), h.data_ptr(), h.nbytes());
  }
  const std::string shard_path = JoinPath(step_dir, kShardName);
  const uint64_t shard_sum = writer.Write(shard_path);

  Json manifest = {
      {"format", "trellis-checkpoint"},
      {"version", kCheckpointVersion},
      {"step", meta.step},
      {"world_size", 1},
      {"shards",
       Json::array(
           {{{"file", kShardName}, {"bytes", FileSize(shard_path)}, {"fnv1a64", shard_sum}}})},
      {"spec", SpecIdentity(spec)},
      {"data", {{"rows_consumed", meta.rows_consumed}, {"corpus_fnv1a64", meta.corpus_checksum}}},
      // All randomness is counter-based: (seed, position) is the RNG state.
      {"rng", {{"seed", spec.training.seed}, {"counter", meta.rows_consumed}}}};
  WriteFileAtomically(JoinPath(step_dir, "manifest.json"), manifest.dump(2) + "\n");
  Prune(dir, keep);
}

CheckpointMeta LoadCheckpoint(const std::string& dir, int64_t step, const spec::TrainerSpec& spec,
                              const NamedTensors& state) {
  const std::string step_dir = StepDir(dir, step);
  const std::string manifest_path = JoinPath(step_dir, "manifest.json");
  if (!PathExists(manifest_path))
    throw TrainError("checkpoint " + step_dir + ": no manifest.json (the step is incomplete)");
  const Json manifest = ReadManifest(manifest_path);
  CheckpointMeta meta;
  try {
    CheckSpec(manifest, spec, manifest_path);
    meta.step = manifest.at("step").get<int64_t>();
    meta.rows_consumed = manifest.at("data").at("rows_consumed").get<int64_t>();
    meta.corpus_checksum = manifest.at("data").at("corpus_fnv1a64").get<uint64_t>();
  } catch (const Json::exception& e) {
    throw TrainError("checkpoint manifest " + manifest_path + ": missing or mistyped field (" +
                     e.what() + ")");
  }
  const auto& shard_info = manifest.at("shards").at(0);
  const std::string shard_path = JoinPath(step_dir, shard_info.at("file").get<std::string>());
  ShardReader reader(shard_path);
  if (reader.file_checksum() != shard_info.at("fnv1a64").get<uint64_t>())
    throw TrainError("checkpoint shard " + shard_path +
                     ": checksum differs from the manifest (corrupt or replaced)");

  torch::NoGradGuard no_grad;
  for (const auto& [name, t] : state) {
    const ShardEntry* e = reader.Find(name);
    if (e == nullptr)
      throw TrainError("checkpoint shard " + shard_path + ": no tensor '" + name + "'");
    if (e->dtype != ToDType(t.scalar_type()) || e->dims != t.sizes().vec())
      throw TrainError("checkpoint shard " + shard_path + ": tensor '" + name + "' is " +
                       DTypeName(e->dtype) + " " + Shape(e->dims) + ", the model expects " +
                       DTypeName(ToDType(t.scalar_type())) + " " + Shape(t.sizes().vec()));
    auto data = reader.Data(*e);
    // Copied into a fresh (aligned) host tensor: entries sit at any byte offset.
    auto src = torch::empty(e->dims, torch::TensorOptions().dtype(t.scalar_type()));
    std::memcpy(src.data_ptr(), data.data(), data.size());
    t.detach().copy_(src);
  }
  return meta;
}

}  // namespace trellis::train
