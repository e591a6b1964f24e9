#include "common/spec/trainer_spec.h"

#include <initializer_list>

#include "common/spec/table_reader.h"

namespace trellis::spec {
namespace {

// A string field restricted to a few values; the error lists them.
void Choice(TableReader* r, std::string_view key, std::string* out,
            std::initializer_list<const char*> accepted) {
  r->String(key, out, 64);
  std::string list;
  for (const char* a : accepted) {
    if (*out == a) return;
    list += list.empty() ? a : std::string(", ") + a;
  }
  r->Error(key, "must be one of " + list + ", got \"" + *out + "\"");
}

void ParseModel(const toml::table& root, ModelSpec* m, FieldErrors* errors) {
  TableReader r(root["model"].as_table(), "model", errors);
  r.Int("layers", &m->layers, 1, 512);
  r.Int("hidden", &m->hidden, 8, 65536);
  r.Int("heads", &m->heads, 1, 1024);
  r.Int("kv_heads", &m->kv_heads, 1, 1024);
  r.Int("experts", &m->experts, 1, 4096);
  r.Int("experts_per_token", &m->experts_per_token, 1, 64);
  r.Int("expert_hidden", &m->expert_hidden, 1, 65536);
  r.Int("expert_groups", &m->expert_groups, 1, 4096);
  r.Int("vocab", &m->vocab, 2, 1 << 20);
  r.Bool("shared_expert", &m->shared_expert);
  r.Double("rope_theta", &m->rope_theta, 1, 1e9);
  r.Double("norm_eps", &m->norm_eps, 1e-12, 1e-1);
  r.Double("init_std", &m->init_std, 1e-6, 1);
  r.Finish();
  if (!r.present()) return;
  if (m->hidden % m->heads != 0)
    r.Error("heads", "must divide model.hidden (" + std::to_string(m->hidden) + ")");
  else if ((m->hidden / m->heads) % 2 != 0)
    r.Error("heads", "must leave an even head size for RoPE (model.hidden / model.heads = " +
                         std::to_string(m->hidden / m->heads) + ")");
  if (m->heads % m->kv_heads != 0)
    r.Error("kv_heads", "must divide model.heads (" + std::to_string(m->heads) + ")");
  if (m->experts_per_token > m->experts) r.Error("experts_per_token", "must be <= model.experts");
  const auto n = [](int v) { return std::to_string(v); };
  if (m->experts % m->expert_groups != 0 || m->experts_per_token % m->expert_groups != 0)
    r.Error("expert_groups", "must divide model.experts (" + n(m->experts) +
                                 ") and model.experts_per_token (" + n(m->experts_per_token) +
                                 "), so every group is the same size and gives a token the same "
                                 "number of experts; got " + n(m->expert_groups));
}

void ParseTraining(const toml::table& root, TrainingSpec* t, FieldErrors* errors) {
  TableReader r(root["training"].as_table(), "training", errors);
  r.Int("seq_len", &t->seq_len, 2, 1 << 20);
  r.Int("global_batch", &t->global_batch, 1, 1 << 20);
  r.Int("micro_batch", &t->micro_batch, 0, 1 << 20);
  r.Int("steps", &t->steps, 1, int64_t{1} << 40);
  r.Double("lr", &t->lr, 0, 10);
  int64_t seed = static_cast<int64_t>(t->seed);
  r.Int("seed", &seed, 0, INT64_MAX);
  t->seed = static_cast<uint64_t>(seed);
  r.String("data", &t->data, 4096);
  Choice(&r, "row_order", &t->row_order, {"shuffled", "cost_bands"});
  r.Int("warmup_steps", &t->warmup_steps, 0, int64_t{1} << 40);
  r.Double("min_lr_ratio", &t->min_lr_ratio, 0, 1);
  r.Double("weight_decay", &t->weight_decay, 0, 10);
  r.Double("grad_clip", &t->grad_clip, 0, 1e6);
  r.Double("adam_beta1", &t->adam_beta1, 0, 0.9999);
  r.Double("adam_beta2", &t->adam_beta2, 0, 0.99999);
  r.Double("adam_eps", &t->adam_eps, 1e-30, 1);
  r.Double("muon_lr", &t->muon_lr, 0, 10);
  r.Double("muon_momentum", &t->muon_momentum, 0, 0.9999);
  r.Int("muon_ns_steps", &t->muon_ns_steps, 1, 100);
  Choice(&r, "muon_ns_dtype", &t->muon_ns_dtype, {"auto", "float32", "bfloat16"});
  r.Double("aux_loss_coef", &t->aux_loss_coef, 0, 100);
  r.Double("router_bias_rate", &t->router_bias_rate, 0, 1);
  Choice(&r, "dtype", &t->dtype, {"auto", "float32", "bfloat16"});
  Choice(&r, "device", &t->device, {"auto", "cpu", "cuda"});
  r.Bool("deterministic", &t->deterministic);
  r.String("init_from", &t->init_from, 4096);
  Choice(&r, "init_state", &t->init_state, {"weights", "weights_optimizer", "all"});
  r.Finish();
  // Whether it divides each rank's rows needs the world (model_fit.h).
  if (t->micro_batch > t->global_batch)
    r.Error("micro_batch", "must be at most training.global_batch (" +
                               std::to_string(t->global_batch) + "), got " +
                               std::to_string(t->micro_batch));
}

// checkpoint.every_steps: a step count (0: only at the end) or "auto".
void ParseEverySteps(TableReader& r, const toml::table* checkpoint, CheckpointSpec* c) {
  r.Known("every_steps");
  if (checkpoint == nullptr || !checkpoint->contains("every_steps")) return;
  const toml::node& n = *checkpoint->get("every_steps");
  const std::string accepted = "must be \"auto\" or a step count in [0, 2^40] (0: only at the end)";
  if (auto text = n.value_exact<std::string>()) {
    if (*text == "auto")
      c->every_steps_auto = true;
    else
      r.Error("every_steps", accepted + ", got \"" + *text + "\"");
    return;
  }
  auto v = n.value_exact<int64_t>();
  if (!v || *v < 0 || *v > (int64_t{1} << 40)) return r.Error("every_steps", accepted);
  c->every_steps = *v;
}

}  // namespace

TrainerSpec ParseTrainerSections(const toml::table& root, FieldErrors* errors) {
  TrainerSpec s;
  ParseModel(root, &s.model, errors);
  {
    TableReader r(root["parallel"].as_table(), "parallel", errors);
    r.Int("node_size", &s.parallel.node_size, 0, 1024);
    r.Int("ep", &s.parallel.ep, 0, 1024);
    Choice(&r, "grad_reduce_dtype", &s.parallel.grad_reduce_dtype, {"bfloat16", "float32"});
    Choice(&r, "expert_gather_dtype", &s.parallel.expert_gather_dtype,
           {"float32", "bfloat16", "fp8"});
    r.Bool("activation_checkpointing", &s.parallel.activation_checkpointing);
    r.Double("offload_fraction", &s.parallel.offload_fraction, 0, 1);
    r.Int("prefetch_layers", &s.parallel.prefetch_layers, 0, 8);
    r.Finish();
    if (s.parallel.ep > 0 && s.model.experts % s.parallel.ep != 0)
      r.Error("ep", "must divide model.experts (" + std::to_string(s.model.experts) + ")");
    if (s.parallel.offload_fraction > 0 && !s.parallel.activation_checkpointing)
      r.Error("offload_fraction",
              "needs parallel.activation_checkpointing = true (what is offloaded is the layer "
              "input checkpointing keeps); accepted with checkpointing off: 0");
  }
  ParseTraining(root, &s.training, errors);
  {
    TableReader r(root["checkpoint"].as_table(), "checkpoint", errors);
    ParseEverySteps(r, root["checkpoint"].as_table(), &s.checkpoint);
    r.Int("keep", &s.checkpoint.keep, 1, 1000);
    r.Bool("at_end", &s.checkpoint.at_end);
    r.Bool("async", &s.checkpoint.async);
    r.Double("async_keep_free_gib", &s.checkpoint.async_keep_free_gib, 0, 65536);
    r.Double("auto_min_s", &s.checkpoint.auto_min_s, 0, 7 * 86400);
    r.Double("auto_max_s", &s.checkpoint.auto_max_s, 1, 7 * 86400);
    r.Finish();
    if (s.checkpoint.auto_min_s > s.checkpoint.auto_max_s)
      r.Error("auto_min_s", "must be at most checkpoint.auto_max_s (" +
                                std::to_string(static_cast<int64_t>(s.checkpoint.auto_max_s)) +
                                " s)");
  }
  return s;
}

}  // namespace trellis::spec
