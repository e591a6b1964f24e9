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
    for (const auto& p : block.params) tensors.push_back({block.FullName(p), StDtype::kF32, p.shape});
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Writes a run's initial weights and token batches as safetensors"};
  std::string spec_path, data, weights, batches, info;
  int64_t steps = 0;
  app.add_option("spec", spec_path, "run spec (TOML)")->required();
  app.add_option("--data", data, "corpus file (overrides training.data)");
  app.add_option("--weights", weights, "write the initial weights here");
  app.add_option("--batches", batches, "write the first --steps batches here");
  app.add_option("--info", info, "write sizes and FLOP counts (JSON) here");
  app.add_option("--steps", steps, "steps of batches")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  CLI11_PARSE(app, argc, argv);
  if (!batches.empty() && steps == 0) {
    std::cerr << "trellis-export: --batches needs --steps\n";
    return 2;
  }
  toml::table root;
  try {
    root = toml::parse_file(spec_path);
  } catch (const toml::parse_error& e) {
    std::cerr << "trellis-export: " << spec_path << ": " << e.description() << "\n";
    return 2;
  }
  trellis::spec::FieldErrors errors;
  auto spec = trellis::spec::ParseTrainerSections(root, &errors);
  if (!errors.empty()) {
    std::cerr << "trellis-export: " << spec_path << ": " << trellis::spec::JoinErrors(errors)
              << "\n";
    return 2;
  }
  if (!data.empty()) spec.training.data = data;
  try {
    if (!info.empty()) WriteInfo(spec, info);
    if (!weights.empty()) WriteWeights(spec, weights);
    if (!batches.empty()) WriteBatches(spec, batches, steps);
  } catch (const TrainError& e) {
    std::cerr << "trellis-export: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
