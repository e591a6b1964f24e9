#include "trainer_core/export/checkpoint_export.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "common/atomic_file_writer.h"
#include "common/model_layout/model_layout.h"
#include "trainer_core/checkpoint/checkpoint.h"
#include "trainer_core/checkpoint/state_ranges.h"
#include "trainer_core/error.h"
#include "trainer_core/export/hf_layout.h"
#include "trainer_core/export/safetensors.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

namespace fs = std::filesystem;

// One block's weights, whole: its flat buffer (model_layout.h) and, for a
// layer, its balancing bias.
struct LoadedBlock {
  int index = -1;
  torch::Tensor flat, router_bias;
};

LoadedBlock LoadBlock(const spec::TrainerSpec& spec, const ExportOptions& o,
                      const std::vector<BlockLayout>& layout, int index) {
  const BlockLayout& block = layout[index];
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat);
  const int64_t dense = DenseNumel(block);
  torch::Tensor dense_part = torch::empty({dense}, f32);
  NamedTensors state{{"param." + block.name, dense_part}};
  torch::Tensor experts, bias;
  if (block.numel > dense) {
    experts = torch::empty({block.numel - dense}, f32);
    bias = torch::empty({spec.model.experts}, f32);
    state.emplace_back("param.experts." + block.name, experts);
    state.emplace_back("router_bias." + block.name, bias);
  }
  // World 1 with no peer: every tensor whole, gathered from the saved mesh's
  // shards as a resume on another world size is.
  Sharding whole;
  whole.mesh = MeshInfo{1, 1, 1};
  whole.ranges = StateRanges(spec.model);
  LoadCheckpoint(o.checkpoint_dir, o.step, spec, state, whole, SpecMatch::kModel);
  LoadedBlock out;
  out.index = index;
  out.flat = experts.defined() ? torch::cat({dense_part, experts}) : dense_part;
  out.router_bias = bias;
  return out;
}

// An empty or absent directory; anything in it would be mixed with the export.
void CheckOutDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  if (!fs::is_directory(dir, ec))
    throw TrainError("export: " + dir + " exists and is not a directory; give a new directory");
  if (!fs::is_empty(dir, ec))
    throw TrainError("export: " + dir + " is not empty; give a new or empty directory (an "
                     "export is never mixed with other files)");
}

void WriteJson(const std::string& path, const nlohmann::ordered_json& j) {
  AtomicFileWriter out(path, 0644, TempName::kDotTmp);
  if (!out.Write(j.dump(2) + "\n") || !out.Commit()) throw TrainError(out.error());
}

// The temporary directory, removed unless the export is renamed into place.
class PartialDir {
 public:
  explicit PartialDir(const std::string& out_dir)
      : path_(out_dir + ".partial-" + std::to_string(::getpid())) {
    std::error_code ec;
    fs::remove_all(path_, ec);
    MakeDirs(path_);
  }
  ~PartialDir() {
    std::error_code ec;
    if (!committed_) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  void RenameTo(const std::string& out_dir) {
    std::error_code ec;
    if (fs::exists(out_dir, ec)) fs::remove(out_dir, ec);  // empty: CheckOutDir
    fs::rename(path_, out_dir, ec);
    if (ec) throw TrainError("export: cannot rename " + path_ + " to " + out_dir + ": " +
                             ec.message());
    committed_ = true;
  }

 private:
  std::string path_;
  bool committed_ = false;
};

}  // namespace

ExportSummary ExportCheckpoint(const spec::TrainerSpec& spec, const ExportOptions& o) {
  if (o.dtype != "float32" && o.dtype != "bfloat16")
    throw TrainError("export: dtype \"" + o.dtype + "\" is not float32 or bfloat16");
  CheckOutDir(o.out_dir);
  CheckCheckpoint(o.checkpoint_dir, o.step, spec, SpecMatch::kModel);  // before any file
  const bool bf16 = o.dtype == "bfloat16";
  const int64_t elem = bf16 ? 2 : 4;
  const std::vector<BlockLayout> layout = ModelLayout(spec.model);
  const std::vector<HfTensor> tensors = HfTensors(spec);
  std::vector<size_t> starts = HfFileStarts(tensors, elem, o.max_file_bytes);
  starts.push_back(tensors.size());
  const size_t files = starts.size() - 1;

  PartialDir partial(o.out_dir);
  ExportSummary summary;
  summary.extensions = HfExtensions(spec);
  summary.layout = HfLayoutName(HfLayoutFor(spec.model));
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  LoadedBlock block;
  std::vector<float> values;
  std::vector<uint16_t> halves;
  for (size_t f = 0; f < files; ++f) {
    const std::string name = HfFileName(f, files);
    std::vector<StTensor> header;
    for (size_t i = starts[f]; i < starts[f + 1]; ++i) {
      header.push_back({tensors[i].name, bf16 ? StDtype::kBF16 : StDtype::kF32, tensors[i].shape});
      weight_map[tensors[i].name] = name;
    }
    SafetensorsWriter out(JoinPath(partial.path(), name), header, {{"format", "pt"}});
    for (size_t i = starts[f]; i < starts[f + 1]; ++i) {
      const HfTensor& t = tensors[i];
      if (block.index != t.block) block = LoadBlock(spec, o, layout, t.block);
      values.resize(t.numel);
      if (t.source == HfTensor::Source::kZeros) {
        std::fill(values.begin(), values.end(), 0.0f);
      } else {
        const torch::Tensor& from =
            t.source == HfTensor::Source::kRouterBias ? block.router_bias : block.flat;
        const float* data = from.data_ptr<float>() + t.offset;
        for (int64_t k = 0; k < t.numel; ++k) values[k] = data[k] * t.scale;  // exact: 2^n
      }
      if (bf16) {
        halves.resize(t.numel);
        for (int64_t k = 0; k < t.numel; ++k) halves[k] = Bf16Bits(values[k]);
        out.Write(halves.data(), t.numel * 2);
      } else {
        out.Write(values.data(), t.numel * 4);
      }
      summary.bytes += t.numel * elem;
      ++summary.tensors;
    }
    out.Finish();
    summary.files.push_back(name);
  }
  WriteJson(JoinPath(partial.path(), "model.safetensors.index.json"),
            {{"metadata", {{"total_size", summary.bytes}}}, {"weight_map", weight_map}});
  WriteJson(JoinPath(partial.path(), "config.json"), HfConfig(spec, o.dtype, o.source));
  partial.RenameTo(o.out_dir);
  return summary;
}

}  // namespace trellis::train
