// A resume: the step's manifest checked against the spec, then each rank's
// tensors read from the shards that hold its ranges (checkpoint.h).
#include "trainer_core/checkpoint/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/checkpoint_layout.h"
#include "trainer_core/checkpoint/checkpoint_fields.h"
#include "trainer_core/checkpoint/shard_file.h"
#include "trainer_core/checkpoint/tensor_io.h"
#include "trainer_core/error.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

using Json = nlohmann::json;

int64_t ElementSize(DType t) { return t == DType::kBF16 ? 2 : t == DType::kF32 ? 4 : 8; }

bool SameRanges(const std::vector<Range>& a, const std::vector<Range>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].begin != b[i].begin || a[i].end != b[i].end) return false;
  return true;
}

int64_t Length(const std::vector<Range>& ranges) {
  int64_t n = 0;
  for (const auto& r : ranges) n += r.end - r.begin;
  return n;
}

std::string Shape(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// What the step's files fail (truncated, corrupt, missing) makes the step
// damaged (error.h), as against a model or spec that does not fit it.
template <typename Read>
auto Undamaged(int64_t step, Read&& read) {
  try {
    return read();
  } catch (const DamagedCheckpoint&) {
    throw;
  } catch (const TrainError& e) {
    throw DamagedCheckpoint(step, e.what());
  }
}

Json ReadManifest(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) throw TrainError("checkpoint manifest " + path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    throw DamagedCheckpoint(
        step, "checkpoint manifest " + path + ": not valid JSON (truncated or corrupt)");
  if (j.value("format", "") != "trellis-checkpoint")
    throw TrainError("checkpoint manifest " + path + ": not a trellis checkpoint manifest");
  const Json version = j.value("version", Json());
  if (!version.is_number_integer() || version.get<int>() < kOldestCheckpointVersion ||
      version.get<int>() > kCheckpointVersion)
    throw TrainError("checkpoint manifest " + path + ": unsupported version " + version.dump() +
                     " (this build reads " + std::to_string(kOldestCheckpointVersion) + " to " +
                     std::to_string(kCheckpointVersion) + ")");
  return j;
}

void CheckSpec(const Json& manifest, const spec::TrainerSpec& spec, const std::string& path,
               SpecMatch match) {
  const Json want = SpecIdentity(spec);
  const Json& have = manifest.at("spec");
  std::string mismatches;
  for (const auto& [key, value] : want.items()) {
    if (match == SpecMatch::kModel && key.rfind("model.", 0) != 0) continue;
    if (have.contains(key) && have.at(key) == value) continue;
    if (!mismatches.empty()) mismatches += "; ";
    mismatches += key + " is " + (have.contains(key) ? have.at(key).dump() : "absent") +
                  " in the checkpoint, " + value.dump() + " in the spec";
  }
  if (!mismatches.empty())
    throw TrainError("checkpoint " + path + " does not match the spec: " + mismatches);
}

// The step's manifest (into *manifest), checked against the spec, and the
// fields a resume needs before any tensor is read.
CheckpointMeta CheckedManifest(const std::string& dir, int64_t step,
                               const spec::TrainerSpec& spec, SpecMatch match, Json* manifest) {
  const std::string step_dir = StepDir(dir, step);
  const std::string path = JoinPath(step_dir, "manifest.json");
  if (!PathExists(path))
    throw TrainError("checkpoint " + step_dir + ": " +
                     (PathExists(step_dir) ? "no manifest.json (the step is incomplete)"
                                           : "no such step") +
                     "; the complete steps in " + dir + ": " +
                     DescribeSteps(CompleteCheckpoints(dir)));
  *manifest = ReadManifest(path, step);
  CheckpointMeta meta;
  try {
    CheckSpec(*manifest, spec, path, match);
    meta.step = manifest->at("step").get<int64_t>();
    meta.rows_consumed = manifest->at("data").at("rows_consumed").get<int64_t>();
    meta.corpus_checksum = manifest->at("data").at("corpus_fnv1a64").get<uint64_t>();
    meta.corpus_version = manifest->at("data").value("corpus_version", 0u);
  } catch (const Json::exception& e) {
    throw TrainError("checkpoint manifest " + path + ": missing or mistyped field (" + e.what() +
                     ")");
  }
  return meta;
}

// The saved shards in the order a rank looks in them for a tensor: those
// already read first, then from the one at the rank's place in the saved
// world (its own shard on the same mesh) on. A replicated tensor is then taken
// from a shard the rank reads anyway, so on the same mesh it reads its own
// shard only, and after a change of world size only those its ranges need.
template <typename Readers>
std::vector<int> ShardOrder(const Readers& readers, int rank, int world, int saved_world) {
  const int start = static_cast<int>(static_cast<int64_t>(rank) * saved_world / world);
  std::vector<int> order;
  for (bool opened : {true, false})
    for (int i = 0; i < saved_world; ++i) {
      const int r = (start + i) % saved_world;
      if ((readers[r] != nullptr) == opened) order.push_back(r);
    }
  return order;
}

}  // namespace

std::string DescribeLoad(const CheckpointMeta& meta, double seconds) {
  const double gib = static_cast<double>(meta.bytes_read) / (1ull << 30);
  char text[256];
  std::snprintf(text, sizeof text,
                "checkpoint step %lld read in %.1f s: %.2f GiB from %d shard file%s (%.2f GiB/s, "
                "checksums and the copy to the device included)",
                static_cast<long long>(meta.step), seconds, gib, meta.shard_files_read,
                meta.shard_files_read == 1 ? "" : "s", seconds > 0 ? gib / seconds : 0.0);
  return text;
}

CheckpointMeta CheckCheckpoint(const std::string& dir, int64_t step,
                               const spec::TrainerSpec& spec, SpecMatch match) {
  Json manifest;
  return CheckedManifest(dir, step, spec, match, &manifest);
}

CheckpointMeta LoadCheckpoint(const std::string& dir, int64_t step, const spec::TrainerSpec& spec,
                              const NamedTensors& state, const Sharding& sharding,
                              SpecMatch match) {
  const std::string step_dir = StepDir(dir, step);
  const std::string manifest_path = JoinPath(step_dir, "manifest.json");
  Json manifest;
  CheckpointMeta meta = CheckedManifest(dir, step, spec, match, &manifest);
  MeshInfo saved;
  Json shards;
  try {
    const Json& m = manifest.at("mesh");
    saved = {m.at("world_size").get<int>(), m.at("node_size").get<int>(), m.at("ep").get<int>()};
    shards = manifest.at("shards");
    if (!shards.is_array() || static_cast<int>(shards.size()) != saved.world || saved.world < 1)
      throw TrainError("checkpoint manifest " + manifest_path + ": " +
                       std::to_string(shards.size()) + " shards listed for world size " +
                       std::to_string(saved.world));
    // Every shard's fields, checked here so that a missing one is named below.
    for (const Json& shard : shards) {
      shard.at("file").get<std::string>();
      shard.at("bytes").get<uint64_t>();
      shard.at(manifest.at("version").get<int>() == 2 ? "fnv1a64" : "index_xxh64")
          .get<uint64_t>();
    }
  } catch (const Json::exception& e) {
    throw TrainError("checkpoint manifest " + manifest_path + ": missing or mistyped field (" +
                     e.what() + ")");
  }
  const int rank = sharding.comm ? sharding.comm->rank() : 0;
  const int world = sharding.comm ? sharding.comm->size() : 1;
  auto ranges = [&](const std::string& name, const MeshInfo& mesh, int r, int64_t numel) {
    return sharding.ranges ? sharding.ranges(name, mesh, r) : std::vector<Range>{{0, numel}};
  };
  // A shard is opened (its index read and checked against the manifest) only
  // when one of its ranges is needed; each entry is verified as it is read.
  const int manifest_version = manifest.at("version").get<int>();
  std::vector<std::unique_ptr<ShardReader>> readers(saved.world);
  auto reader = [&](int r) -> ShardReader& {
    if (!readers[r]) Undamaged(step, [&] {
      const Json& recorded = shards[r];
      const std::string path = JoinPath(step_dir, recorded.at("file").get<std::string>());
      readers[r] = std::make_unique<ShardReader>(path);
      const ShardReader& rd = *readers[r];
      if (rd.size() != recorded.at("bytes").get<uint64_t>())
        throw TrainError("checkpoint shard " + path + ": " + std::to_string(rd.size()) +
                         " bytes, the manifest recorded " + recorded.at("bytes").dump() +
                         " (truncated or replaced)");
      // Version 2 recorded the whole file's FNV-1a (a pass of its own).
      const bool as_recorded =
          manifest_version == 2
              ? rd.WholeFileFnv1a() == recorded.at("fnv1a64").get<uint64_t>()
              : rd.index_checksum() == recorded.at("index_xxh64").get<uint64_t>();
      if (!as_recorded)
        throw TrainError("checkpoint shard " + path +
                         ": checksum differs from the manifest (corrupt or replaced)");
    });
    return *readers[r];
  };

  torch::NoGradGuard no_grad;
  TensorIo io;
  for (const auto& [name, t] : state) {
    const auto want = ranges(name, sharding.mesh, rank, t.numel());
    const int64_t need = Length(want);
    const DType dtype = ToDType(t.scalar_type());
    const int64_t elem = ElementSize(dtype);
    // Resharding fills a host buffer from the overlaps, copied in at the end;
    // elements outside `want` (padding) stay zero.
    torch::Tensor dst;
    int64_t covered = 0;
    for (int r : ShardOrder(readers, rank, world, saved.world)) {
      if (covered >= need) break;
      const auto have = ranges(name, saved, r, t.numel());
      bool overlaps = false;
      for (const auto& h : have)
        for (const auto& w : want) overlaps |= std::max(h.begin, w.begin) < std::min(h.end, w.end);
      if (!overlaps) continue;
      ShardReader& rd = reader(r);
      const ShardEntry* e = rd.Find(name);
      if (e == nullptr)
        throw TrainError("checkpoint shard " + rd.path() + ": no tensor '" + name + "'");
      if (e->dtype != dtype || static_cast<int64_t>(e->bytes) < Length(have) * elem ||
          (saved.world == 1 && sharding.comm == nullptr && e->dims != t.sizes().vec()))
        throw TrainError("checkpoint shard " + rd.path() + ": tensor '" + name + "' is " +
                         DTypeName(e->dtype) + " " + Shape(e->dims) + ", the model expects " +
                         DTypeName(dtype) + " " + Shape(t.sizes().vec()));
      // Laid out as saved (the same mesh, or a tensor every rank holds
      // whole): the entry goes straight into the tensor.
      if (covered == 0 && SameRanges(have, want) && e->bytes == t.nbytes() &&
          t.is_contiguous()) {
        Undamaged(step, [&] { io.Read(rd, *e, t); });
        if (need < t.numel()) t.detach().view({-1}).narrow(0, need, t.numel() - need).zero_();
        covered = need;
        break;
      }
      if (!dst.defined())
        dst = torch::zeros({t.numel()}, torch::TensorOptions().dtype(t.scalar_type()));
      char* out = static_cast<char*>(dst.data_ptr());
      const std::string data = Undamaged(step, [&] { return rd.ReadBytes(*e); });
      int64_t at_have = 0;
      for (const auto& h : have) {
        int64_t at_want = 0;
        for (const auto& w : want) {
          const int64_t lo = std::max(h.begin, w.begin), hi = std::min(h.end, w.end);
          if (lo < hi) {
            std::memcpy(out + (at_want + lo - w.begin) * elem,
                        data.data() + (at_have + lo - h.begin) * elem, (hi - lo) * elem);
            covered += hi - lo;
          }
          at_want += w.end - w.begin;
        }
        at_have += h.end - h.begin;
      }
    }
    if (covered != need)
      throw TrainError("checkpoint " + step_dir + ": tensor '" + name +
                       "' is not fully covered by " + "its shards (" + std::to_string(covered) +
                       " of " + std::to_string(need) + " elements)");
    if (dst.defined()) t.detach().copy_(dst.view(t.sizes()));
  }
  for (const auto& rd : readers) {
    if (!rd) continue;
    ++meta.shard_files_read;
    meta.bytes_read += rd->bytes_read();
  }
  return meta;
}

}  // namespace trellis::train
