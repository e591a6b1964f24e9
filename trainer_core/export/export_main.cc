// trellis-export CHECKPOINT[@STEP] OUT/ [--dtype float32|bfloat16] [--spec SPEC.toml]
//   A trained model out of a checkpoint: the sharded checkpoint (of any mesh)
//   gathered into safetensors files under Hugging Face Mixtral's names (or
//   Qwen2-MoE's, for a shared expert), with model.safetensors.index.json and
//   config.json (export/hf_layout.h says why those layouts). CHECKPOINT is a run directory, its checkpoints/ directory or
//   one step-NNNNNNNN/ of it; STEP defaults to the newest complete one. The
//   spec is the run's spec.toml beside checkpoints/ unless --spec gives it.
//   `trellis export RUN[@STEP] OUT/` finds a controller run's checkpoint and
//   runs this.
//
// trellis-export SPEC.toml --data CORPUS [--weights OUT.safetensors]
//                          [--batches OUT.safetensors --steps N] [--info OUT.json]
// What another implementation needs to train the same run: the initial
// weights exactly as trellis-train draws them (fp32, one tensor per layout
// parameter, named "<block>.<param>", e.g. layers.0.wq [out, in], experts
// stacked [E, out, in]) and the token rows of steps 1..N ("inputs",
// "targets": int32 [N, global_batch, seq_len], -1 = no target). The weights
// come from the same counter-based init (model/init.h) the trainer uses, so
// no model is built. --info writes the model's sizes and FLOP counts
// (model/flops.h) for MFU. Refuses rows that hold several documents: the reference
// implementations attend causally only.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "common/atomic_file_writer.h"
#include "common/model_layout/model_layout.h"
#include "common/spec/trainer_spec.h"
#include "trainer_core/data/batches.h"
#include "trainer_core/error.h"
#include "trainer_core/export/checkpoint_export.h"
#include "trainer_core/export/checkpoint_source.h"
#include "trainer_core/export/safetensors.h"
#include "trainer_core/model/flops.h"
#include "trainer_core/model/init.h"

namespace {

using namespace trellis::train;
using trellis::AtomicFileWriter;
using trellis::TempName;

void WriteWeights(const trellis::spec::TrainerSpec& spec, const std::string& path) {
  const auto layout = ModelLayout(spec.model);
  std::vector<StTensor> tensors;
  for (const auto& block : layout)
    for (const auto& p : block.params)
      tensors.push_back({block.FullName(p), StDtype::kF32, p.shape});
  SafetensorsWriter out(path, tensors,
                        {{"format", "pt"}, {"seed", std::to_string(spec.training.seed)}});
  std::vector<float> buf;
  for (const auto& block : layout)
    for (const auto& p : block.params) {
      buf.resize(p.numel);
      if (p.init == Init::kOnes)
        std::fill(buf.begin(), buf.end(), 1.0f);
      else
        FillTruncatedNormal(ParamSeed(spec.training.seed, block.FullName(p)), 0, p.numel, p.std,
                            buf.data());
      out.Write(buf.data(), p.numel * sizeof(float));
    }
  out.Finish();
}

void WriteBatches(const trellis::spec::TrainerSpec& spec, const std::string& path, int64_t steps) {
  const auto& t = spec.training;
  Corpus corpus = ReadCorpus(t.data);
  BatchSource source(&corpus, t.seq_len, t.global_batch, t.seed, ParseRowOrder(t.row_order));
  const std::vector<int64_t> shape{steps, t.global_batch, t.seq_len};
  SafetensorsWriter out(path, {{"inputs", StDtype::kI32, shape}, {"targets", StDtype::kI32, shape}},
                        {{"format", "pt"}, {"corpus", t.data}});
  std::vector<std::vector<int32_t>> fields(2);
  for (int64_t step = 0; step < steps; ++step) {
    HostBatch b = source.ForStep(step);
    for (int64_t r = 0; r < b.rows; ++r) {
      auto first = b.doc_ids.begin() + r * b.seq_len;
      if (!std::all_of(first, first + b.seq_len, [&](int64_t d) { return d == *first; }))
        throw TrainError("step " + std::to_string(step + 1) + " row " + std::to_string(r) +
                         " holds several documents; the exported batches are for causal-only "
                         "attention (use a corpus of long documents, e.g. trellis-corpus "
                         "synthetic)");
    }
    fields[0].insert(fields[0].end(), b.inputs.begin(), b.inputs.end());
    fields[1].insert(fields[1].end(), b.targets.begin(), b.targets.end());
  }
  for (const auto& f : fields) out.Write(f.data(), f.size() * sizeof(int32_t));
  out.Finish();
}

void WriteInfo(const trellis::spec::TrainerSpec& spec, const std::string& path) {
  int64_t params = 0;
  for (const auto& b : ModelLayout(spec.model)) params += b.numel;
  const auto& t = spec.training;
  nlohmann::ordered_json j{
      {"params", params},
      {"active_params_per_token", ActiveParamsPerToken(spec.model)},
      {"tokens_per_step", int64_t{t.global_batch} * t.seq_len},
      {"global_batch", t.global_batch},
      {"micro_batch", t.micro_batch},  // rows per forward per rank; 0: all of them
      {"row_order", t.row_order},
      {"expert_groups", spec.model.expert_groups},  // 1: plain top-k routing
      {"training_flops_per_token", TrainingFlopsPerToken(spec.model, t.seq_len)},
      {"newton_schulz_flops_per_step", NewtonSchulzFlopsPerStep(spec.model, t.muon_ns_steps)}};
  AtomicFileWriter out(path, 0666, TempName::kDotTmp);  // beside the exports, as they are
  if (!out.Write(j.dump(1) + "\n") || !out.Commit()) throw TrainError(out.error());
}

// "5GB", "512MB", "100KB" or plain bytes: Hugging Face's max_shard_size.
int64_t ParseSize(const std::string& text) {
  size_t used = 0;
  double n = 0;
  try {
    n = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  const std::pair<const char*, double> kUnits[] = {
      {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"KiB", 1024.0},
      {"MiB", 1024.0 * 1024}, {"GiB", 1024.0 * 1024 * 1024}};
  for (const auto& [name, scale] : kUnits)
    if (used > 0 && n > 0 && unit == name) return static_cast<int64_t>(n * scale);
  throw TrainError("--max-file-size \"" + text + "\" is not a size (e.g. 5GB, 512MB, 2GiB)");
}

trellis::spec::TrainerSpec ReadSpec(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw TrainError(path + ": " + std::string(e.description()));
  }
  trellis::spec::FieldErrors errors;
  auto spec = trellis::spec::ParseTrainerSections(root, &errors);
  if (!errors.empty()) throw TrainError(path + ": " + trellis::spec::JoinErrors(errors));
  return spec;
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

int ExportModel(const std::string& source_arg, const std::string& out_dir,
                const std::string& spec_arg, ExportOptions o, bool json) {
  const CheckpointSource src = ResolveCheckpointSource(source_arg);
  const std::string spec_path = spec_arg.empty() ? src.spec_beside : spec_arg;
  if (spec_path.empty())
    throw TrainError("no spec.toml beside " + src.dir + "; give the run's spec with --spec");
  o.checkpoint_dir = src.dir;
  o.step = src.step;
  o.out_dir = out_dir;
  if (o.source.empty()) o.source = src.dir + " step " + std::to_string(src.step);
  const ExportSummary done = ExportCheckpoint(ReadSpec(spec_path), o);
  if (json) {
    std::cout << nlohmann::ordered_json{{"checkpoint_dir", src.dir},
                                        {"step", src.step},
                                        {"out", out_dir},
                                        {"layout", done.layout},
                                        {"dtype", o.dtype},
                                        {"files", done.files},
                                        {"tensors", done.tensors},
                                        {"bytes", done.bytes},
                                        {"extensions", done.extensions}}
                     .dump()
              << "\n";
    return 0;
  }
  std::cout << "exported step " << src.step << " of " << src.dir << " to " << out_dir << ": "
            << done.tensors << " tensors, " << done.bytes << " bytes (" << o.dtype << ") in "
            << done.files.size() << " safetensors file" << (done.files.size() == 1 ? "" : "s")
            << ", with model.safetensors.index.json and config.json (Hugging Face "
            << (done.layout == "mixtral" ? "Mixtral" : "Qwen2-MoE") << " layout)\n";
  if (!done.extensions.empty()) {
    std::string list;
    for (const auto& e : done.extensions) list += (list.empty() ? "" : ", ") + e;
    std::cout << "note: this model has what the layout has not (" << list
              << "): exported and listed in config.json's trellis_extensions; a stock loader "
                 "leaves them out, so its outputs differ from the trained model's\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Exports a trained model from a checkpoint (safetensors, Hugging Face Mixtral "
               "or Qwen2-MoE layout), or a spec's initial weights and token batches"};
  app.footer(
      "Examples:\n"
      "  trellis-export runs/7/checkpoints@40 model-7/     step 40 as safetensors\n"
      "  trellis-export runs/7 model-7/ --dtype bfloat16   the newest step, in bf16\n"
      "  trellis-export spec.toml --weights w.safetensors  a spec's initial weights");
  std::string source, out_dir, spec_arg, data, weights, batches, info, format = "safetensors";
  std::string max_size = "5GB";
  ExportOptions options;
  int64_t steps = 0;
  bool json = false;
  app.add_option("source", source,
                 "a checkpoint: RUN_DIR, CHECKPOINT_DIR or STEP_DIR, with @STEP (default: "
                 "the newest); or a run spec (.toml) for --weights/--batches/--info")
      ->required();
  app.add_option("out", out_dir, "the export's directory (new or empty), for a checkpoint");
  app.add_option("--format", format, "the export's format")->check(CLI::IsMember({"safetensors"}));
  app.add_option("--dtype", options.dtype, "the exported weights' dtype")
      ->check(CLI::IsMember({"float32", "bfloat16"}));
  app.add_option("--max-file-size", max_size, "the largest safetensors file (e.g. 5GB)");
  app.add_flag("--json", json, "print what was written as JSON, for a checkpoint");
  app.add_option("--spec", spec_arg, "the run's spec (default: spec.toml beside checkpoints/)");
  app.add_option("--source-name", options.source, "where the weights came from, for config.json")
      ->group("");  // set by `trellis export`
  app.add_option("--data", data, "corpus file (overrides training.data)");
  app.add_option("--weights", weights, "write the spec's initial weights here");
  app.add_option("--batches", batches, "write the first --steps batches here");
  app.add_option("--info", info, "write sizes and FLOP counts (JSON) here");
  app.add_option("--steps", steps, "steps of batches")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  CLI11_PARSE(app, argc, argv);
  const bool from_spec = EndsWith(source, ".toml");
  try {
    if (!from_spec) {
      if (out_dir.empty()) throw TrainError("give the export's directory: trellis-export " +
                                            source + " OUT/");
      if (!weights.empty() || !batches.empty() || !info.empty() || !data.empty())
        throw TrainError("--weights, --batches, --info and --data take a run spec (.toml), "
                         "not a checkpoint");
      options.max_file_bytes = ParseSize(max_size);
      return ExportModel(source, out_dir, spec_arg, options, json);
    }
    if (!out_dir.empty())
      throw TrainError("a spec exports with --weights, --batches or --info, not into " +
                       out_dir + " (a checkpoint exports into a directory)");
    if (!batches.empty() && steps == 0) throw TrainError("--batches needs --steps");
    auto spec = ReadSpec(source);
    if (!data.empty()) spec.training.data = data;
    if (!info.empty()) WriteInfo(spec, info);
    if (!weights.empty()) WriteWeights(spec, weights);
    if (!batches.empty()) WriteBatches(spec, batches, steps);
  } catch (const TrainError& e) {
    std::cerr << "trellis-export: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
