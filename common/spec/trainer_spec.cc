#include "common/spec/trainer_spec.h"

#include "common/spec/table_reader.h"

namespace trellis::spec {

TrainerSpec ParseTrainerSections(const toml::table& root, FieldErrors* errors) {
  TrainerSpec s;
  {
    TableReader r(root["model"].as_table(), "model", errors);
    r.Int("layers", &s.model.layers, 1, 512);
    r.Int("hidden", &s.model.hidden, 8, 65536);
    r.Int("heads", &s.model.heads, 1, 1024);
    r.Int("kv_heads", &s.model.kv_heads, 1, 1024);
    r.Int("experts", &s.model.experts, 1, 4096);
    r.Int("experts_per_token", &s.model.experts_per_token, 1, 64);
    r.Int("expert_hidden", &s.model.expert_hidden, 1, 65536);
    r.Int("vocab", &s.model.vocab, 2, 1 << 20);
    r.Bool("shared_expert", &s.model.shared_expert);
    r.Finish();
    if (r.present()) {
      if (s.model.hidden % s.model.heads != 0)
        r.Error("heads", "must divide model.hidden (" + std::to_string(s.model.hidden) + ")");
      if (s.model.heads % s.model.kv_heads != 0)
        r.Error("kv_heads", "must divide model.heads (" + std::to_string(s.model.heads) + ")");
      if (s.model.experts_per_token > s.model.experts)
        r.Error("experts_per_token", "must be <= model.experts");
    }
  }
  {
    TableReader r(root["parallel"].as_table(), "parallel", errors);
    r.Int("node_size", &s.parallel.node_size, 0, 1024);
    r.Int("ep", &s.parallel.ep, 0, 1024);
    r.Finish();
  }
  {
    TableReader r(root["training"].as_table(), "training", errors);
    r.Int("seq_len", &s.training.seq_len, 2, 1 << 20);
    r.Int("global_batch", &s.training.global_batch, 1, 1 << 20);
    r.Int("steps", &s.training.steps, 1, int64_t{1} << 40);
    r.Double("lr", &s.training.lr, 0, 10);
    int64_t seed = static_cast<int64_t>(s.training.seed);
    r.Int("seed", &seed, 0, INT64_MAX);
    s.training.seed = static_cast<uint64_t>(seed);
    r.String("data", &s.training.data, 4096);
    r.Finish();
  }
  {
    TableReader r(root["checkpoint"].as_table(), "checkpoint", errors);
    r.Int("every_steps", &s.checkpoint.every_steps, 0, int64_t{1} << 40);
    r.Int("keep", &s.checkpoint.keep, 1, 1000);
    r.Finish();
  }
  return s;
}

}  // namespace trellis::spec
