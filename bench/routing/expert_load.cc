// What group-limited routing (model.expert_groups) evens out and what it
// costs: trains the spec's model on a corpus at world 1 once per
// --groups value (same weights, same batches) and prints one JSON object per
// run on standard output (bench/routing/run.sh and init.sh table them). Each
// figure is given as its mean over the second half of the steps, its worst,
// and its worst at step 1 (the untrained model):
//  - the load of expert-parallel ranks: for each --ep size, the token-expert
//    pairs of the busiest EP rank (a block of experts / ep consecutive
//    experts) over the mean rank's, per layer and forward (each micro-batch
//    where the spec sets them); the model does not depend on the world size,
//    so world 1 gives every mesh's routing exactly (without micro-batches:
//    with them, a forward at world W routes W times world 1's rows);
//  - the busiest expert over the mean expert, likewise, over all layers and
//    for each layer (expert_load_by_layer: which layer is uneven);
//  - the loss: each step's batch is scored before the model trains on it, so
//    within the first epoch the step losses are losses on unseen text.
//   expert_load SPEC --data CORPUS --steps N --groups 1 --groups 4 --ep 4 --ep 8
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "common/spec/trainer_spec.h"
#include "trainer_core/data/batches.h"
#include "trainer_core/data/corpus.h"
#include "trainer_core/error.h"
#include "trainer_core/trainer.h"

using namespace trellis;
using namespace trellis::train;

namespace {

// max over mean of `load`'s parts, each `width` consecutive entries summed.
double MaxOverMean(const std::vector<int64_t>& load, size_t width) {
  int64_t total = 0, most = 0;
  for (size_t first = 0; first < load.size(); first += width) {
    int64_t part = 0;
    for (size_t i = first; i < first + width; ++i) part += load[i];
    total += part;
    most = std::max(most, part);
  }
  const double parts = static_cast<double>(load.size() / width);
  return total == 0 ? 1.0 : static_cast<double>(most) * parts / static_cast<double>(total);
}

// Mean over the second half of the steps (the router has learned by then),
// the worst over all of them, and the worst of step 1 (the untrained model:
// what the initialization routes), of one figure per (step, layer).
struct Figure {
  double sum_late = 0, worst = 0, first = 0;
  int64_t late = 0;
  void Add(double v, int64_t step, bool is_late) {
    worst = std::max(worst, v);
    if (step == 1) first = std::max(first, v);
    if (is_late) {
      sum_late += v;
      ++late;
    }
  }
  nlohmann::ordered_json Json() const {
    return {{"late_mean_max_over_mean", late ? sum_late / static_cast<double>(late) : 0.0},
            {"worst_max_over_mean", worst},
            {"first_step_max_over_mean", first}};
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Expert-parallel load and loss, plain against group-limited routing"};
  std::string spec_path, data;
  int64_t steps = 0;
  std::vector<int> groups_list, eps;
  app.add_option("spec", spec_path, "run spec (TOML)")->required();
  app.add_option("--data", data, "corpus file (overrides training.data)")->required();
  app.add_option("--steps", steps, "steps per run")->required()->check(CLI::Range(2, 1 << 20));
  app.add_option("--groups", groups_list, "model.expert_groups of a run (repeatable)")
      ->required();
  app.add_option("--ep", eps, "expert-parallel sizes to count the load for (repeatable)")
      ->required();
  CLI11_PARSE(app, argc, argv);
  try {
    spec::FieldErrors errors;
    auto spec = spec::ParseTrainerSections(toml::parse_file(spec_path), &errors);
    if (!errors.empty()) throw TrainError(spec_path + ": " + spec::JoinErrors(errors));
    spec.training.data = data;
    spec.training.steps = steps;
    for (int ep : eps)
      if (ep < 1 || spec.model.experts % ep != 0)
        throw TrainError("--ep " + std::to_string(ep) + " does not divide model.experts = " +
                         std::to_string(spec.model.experts));
    const Corpus corpus = ReadCorpus(data);
    const int64_t rows = BatchSource(&corpus, spec.training.seq_len, 1, 0).num_rows();
    for (int groups : groups_list) {
      spec.model.expert_groups = groups;
      std::vector<Figure> rank_load(eps.size());
      Figure expert_load;
      std::vector<Figure> layer_load(static_cast<size_t>(spec.model.layers));
      std::vector<double> losses;
      TrainerOptions o;
      o.on_step = [&](const StepRecord& r) { losses.push_back(r.loss); };
      o.on_expert_load = [&](int64_t step,
                             const std::vector<std::vector<std::vector<int64_t>>>& forwards) {
        const bool late = step > steps / 2;
        for (const auto& forward : forwards) {
          for (size_t l = 0; l < forward.size(); ++l) {
            const auto& layer = forward[l];
            for (size_t i = 0; i < eps.size(); ++i)
              rank_load[i].Add(MaxOverMean(layer, layer.size() / static_cast<size_t>(eps[i])),
                               step, late);
            const double experts = MaxOverMean(layer, 1);
            expert_load.Add(experts, step, late);
            layer_load.at(l).Add(experts, step, late);
          }
        }
      };
      Trainer trainer(spec, o);
      std::cerr << "expert_groups " << groups << ": " << trainer.Describe() << "\n";
      trainer.Run(steps);
      nlohmann::ordered_json ranks = nlohmann::ordered_json::object();
      for (size_t i = 0; i < eps.size(); ++i) ranks[std::to_string(eps[i])] = rank_load[i].Json();
      nlohmann::ordered_json by_layer = nlohmann::ordered_json::array();
      for (const auto& f : layer_load) by_layer.push_back(f.Json());
      // The last tenth of the steps' losses, each on a batch not yet trained on.
      const size_t tail = std::max<size_t>(1, losses.size() / 10);
      double tail_loss = 0;
      for (size_t i = losses.size() - tail; i < losses.size(); ++i) tail_loss += losses[i];
      nlohmann::ordered_json out{
          {"expert_groups", groups},
          {"experts", spec.model.experts},
          {"experts_per_token", spec.model.experts_per_token},
          {"layers", spec.model.layers},
          {"steps", steps},
          {"tokens_per_step", int64_t{spec.training.global_batch} * spec.training.seq_len},
          {"epochs", static_cast<double>(steps * spec.training.global_batch) /
                         static_cast<double>(rows)},
          {"aux_loss_coef", spec.training.aux_loss_coef},
          {"router_bias_rate", spec.training.router_bias_rate},
          {"first_loss", losses.front()},
          {"tail_loss", tail_loss / static_cast<double>(tail)},
          {"tail_steps", tail},
          {"ep_rank_load", ranks},
          {"expert_load", expert_load.Json()},
          {"expert_load_by_layer", by_layer}};
      std::cout << out.dump() << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "expert_load: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
