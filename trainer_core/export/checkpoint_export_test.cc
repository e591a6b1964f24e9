// trellis-export of a trained checkpoint, as a user runs it: trellis-train
// (world 1, or 2 processes over gloo) saves step 5; the export is read back
// with a safetensors reader written here from the format's description, and
// every tensor is compared with the shards' elements, gathered here by the
// layout the trainer documents (dense state flat-sharded rank after rank,
// experts owned in equal blocks, [gate, up, down][experts][out in]).
// hf_reference.py then runs the exported model as a Mixtral (or Qwen2-MoE)
// loader would and must give the loss trellis-train reported for step 6,
// whose weights are step 5's. Torch-free: it spawns the binaries.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "trainer_core/checkpoint/shard_file.h"
#include "trainer_core/data/corpus.h"
#include "trainer_core/files.h"
#include "trainer_core/parallel/rank_runs.h"

namespace trellis::train {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

struct Command {
  int status = -1;
  std::string output;
};

Command RunShell(const std::string& command) {
  Command c;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return c;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) c.output.append(buf, n);
  const int raw = ::pclose(p);
  c.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return c;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The safetensors format: u64 little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end)}, "__metadata__"},
// then the data the offsets index. Every tensor here as floats.
struct StFile {
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::string> dtypes;
  std::map<std::string, std::vector<float>> values;
};

StFile ReadSafetensors(const std::string& path) {
  const std::string blob = ReadText(path);
  StFile f;
  EXPECT_GE(blob.size(), 8u) << path;
  if (blob.size() < 8) return f;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<uint8_t>(blob[i]);
  EXPECT_LE(8 + n, blob.size()) << path;
  const Json header = Json::parse(blob.substr(8, n));
  const size_t data = 8 + n;
  uint64_t end_of_data = 0;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string dtype = info.at("dtype");
    const uint64_t begin = info.at("data_offsets")[0], end = info.at("data_offsets")[1];
    end_of_data = std::max(end_of_data, end);
    int64_t count = 1;
    for (int64_t d : info.at("shape").get<std::vector<int64_t>>()) count *= d;
    const uint64_t size = dtype == "BF16" ? 2 : 4;
    EXPECT_EQ(end - begin, count * size) << path << " " << name;
    std::vector<float> v(count);
    for (int64_t i = 0; i < count; ++i) {
      const char* at = blob.data() + data + begin + i * size;
      uint32_t bits = 0;
      if (size == 2)
        bits = uint32_t{static_cast<uint8_t>(at[0])} << 16 |
               uint32_t{static_cast<uint8_t>(at[1])} << 24;
      else
        for (int b = 3; b >= 0; --b) bits = bits << 8 | static_cast<uint8_t>(at[b]);
      std::memcpy(&v[i], &bits, 4);
    }
    f.shapes[name] = info.at("shape").get<std::vector<int64_t>>();
    f.dtypes[name] = dtype;
    f.values[name] = std::move(v);
  }
  EXPECT_EQ(data + end_of_data, blob.size()) << path << ": bytes after the last tensor";
  return f;
}

// The model of the test's spec.
constexpr int64_t kLayers = 2, kHidden = 32, kHeads = 4, kKv = 2, kHd = 8, kExperts = 4,
                  kFfn = 32, kVocab = 256;

struct Model {
  int world = 2;
  bool shared = true;  // a shared expert: the Qwen2-MoE layout; else Mixtral's
  bool bias = true;    // the balancing bias, exported as an extension
};

using Tensors = std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>;
Tensors FromShards(const std::string& step_dir, const Model& m);

class CheckpointExportTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("trellis-export-test"); }
  void TearDown() override { RemoveTree(dir_); }
  // Trains `m` 6 steps (a checkpoint at 5), exports step 5 into out_ in
  // files of at most 40 kB and checks it: every tensor bit for bit against
  // the shards, and the model run by hf_reference.py against step 6's loss.
  // Returns what the export printed.
  std::string TrainExportAndCheck(const Model& m);
  std::string dir_, spec_, ckpt_, out_;
  Tensors want_;  // from the shards
};

// Every tensor the export must hold, gathered from the shards: dense state
// rank after rank (padding at the end), rank r owning experts [r E/W, (r+1)
// E/W) stored [gate, up, down][its experts][out in].
Tensors FromShards(const std::string& step_dir, const Model& m) {
  std::vector<std::unique_ptr<ShardReader>> shards;
  for (int r = 0; r < m.world; ++r)
    shards.push_back(std::make_unique<ShardReader>(JoinPath(
        step_dir, "shard-0000" + std::to_string(r) + "-of-0000" + std::to_string(m.world) +
                      ".bin")));
  auto floats = [](const ShardReader& r, const std::string& name) {
    const ShardEntry* e = r.Find(name);
    EXPECT_NE(e, nullptr) << r.path() << " " << name;
    if (!e) return std::vector<float>{};
    const std::string d = r.ReadBytes(*e);
    std::vector<float> v(d.size() / 4);
    std::memcpy(v.data(), d.data(), d.size());
    return v;
  };
  auto dense = [&](const std::string& name, int64_t numel) {
    std::vector<float> all;
    for (const auto& shard : shards) {
      const std::vector<float> part = floats(*shard, name);
      all.insert(all.end(), part.begin(), part.end());
    }
    all.resize(numel);
    return all;
  };
  Tensors want;
  auto take = [&](const std::string& name, std::vector<int64_t> shape,
                  const std::vector<float>& from, int64_t* at, float scale = 1) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(from.begin() + *at, from.begin() + *at + n);
    for (float& x : v) x *= scale;
    want[name] = {shape, v};
    *at += n;
  };
  auto zeros = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t at = 0, n = 1;
    for (int64_t d : shape) n *= d;
    take(name, shape, std::vector<float>(n, 0.0f), &at);
  };
  int64_t at = 0;
  take("model.embed_tokens.weight", {kVocab, kHidden}, dense("param.embed", kVocab * kHidden),
       &at);
  const int64_t layer_dense = 2 * kHidden + 2 * kHeads * kHd * kHidden +
                              2 * kKv * kHd * kHidden + kExperts * kHidden +
                              (m.shared ? 3 * kFfn * kHidden : 0);
  const std::string moe = m.shared ? "mlp." : "block_sparse_moe.";
  for (int l = 0; l < kLayers; ++l) {
    const std::string block = "layers." + std::to_string(l), p = "model." + block + ".";
    const std::vector<float> d = dense("param." + block, layer_dense);
    at = 0;
    take(p + "input_layernorm.weight", {kHidden}, d, &at);
    take(p + "self_attn.q_proj.weight", {kHeads * kHd, kHidden}, d, &at);
    take(p + "self_attn.k_proj.weight", {kKv * kHd, kHidden}, d, &at);
    take(p + "self_attn.v_proj.weight", {kKv * kHd, kHidden}, d, &at);
    take(p + "self_attn.o_proj.weight", {kHidden, kHeads * kHd}, d, &at);
    take(p + "post_attention_layernorm.weight", {kHidden}, d, &at);
    take(p + moe + "gate.weight", {kExperts, kHidden}, d, &at);
    if (m.shared) {  // Qwen2-MoE: zero q/k/v biases, the shared expert's gate at sigmoid(0)
      zeros(p + "self_attn.q_proj.bias", {kHeads * kHd});
      zeros(p + "self_attn.k_proj.bias", {kKv * kHd});
      zeros(p + "self_attn.v_proj.bias", {kKv * kHd});
      take(p + "mlp.shared_expert.gate_proj.weight", {kFfn, kHidden}, d, &at);
      take(p + "mlp.shared_expert.up_proj.weight", {kFfn, kHidden}, d, &at);
      take(p + "mlp.shared_expert.down_proj.weight", {kHidden, kFfn}, d, &at, 2.0f);
      zeros(p + "mlp.shared_expert_gate.weight", {1, kHidden});
    }
    EXPECT_EQ(at, layer_dense);
    if (m.bias)
      want[p + moe + "gate.e_score_correction_bias"] = {{kExperts},
                                                       floats(*shards[0], "router_bias." + block)};
    std::vector<std::vector<float>> owned;
    for (const auto& shard : shards) owned.push_back(floats(*shard, "param.experts." + block));
    const int64_t fh = kFfn * kHidden, per_rank = kExperts / m.world;
    const char* names[2][3] = {{"w1", "w3", "w2"}, {"gate_proj", "up_proj", "down_proj"}};
    for (int part = 0; part < 3; ++part)
      for (int64_t e = 0; e < kExperts; ++e) {
        const std::vector<float>& src = owned[e / per_rank];
        const int64_t first = (part * per_rank + e % per_rank) * fh;
        want[p + moe + "experts." + std::to_string(e) + "." + names[m.shared][part] +
             ".weight"] = {
            part == 2 ? std::vector<int64_t>{kHidden, kFfn} : std::vector<int64_t>{kFfn, kHidden},
            std::vector<float>(src.begin() + first, src.begin() + first + fh)};
      }
  }
  const std::vector<float> fin = dense("param.final", kHidden + kVocab * kHidden);
  at = 0;
  take("model.norm.weight", {kHidden}, fin, &at);
  take("lm_head.weight", {kVocab, kHidden}, fin, &at);
  return want;
}

// bf16 of an fp32, rounded to the nearest even, as the reader widens it.
float Bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

std::string CheckpointExportTest::TrainExportAndCheck(const Model& m) {
  BuildStats stats;
  const std::string corpus = JoinPath(dir_, "corpus.bin");
  WriteCorpus(corpus, BuildByteCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"}, &stats));
  spec_ = JoinPath(dir_, "spec.toml");
  ckpt_ = JoinPath(dir_, "checkpoints");
  std::ofstream(spec_)
      << "[model]\nlayers = 2\nhidden = 32\nheads = 4\nkv_heads = 2\nexperts = 4\n"
         "experts_per_token = 2\nexpert_hidden = 32\nshared_expert = "
      << (m.shared ? "true" : "false") << "\n[parallel]\nnode_size = " << m.world
      << "\nep = " << m.world
      << "\ngrad_reduce_dtype = \"float32\"\n"
         "[training]\ndtype = \"float32\"\nseq_len = 32\nglobal_batch = 4\nsteps = 6\n"
         "warmup_steps = 2\nrouter_bias_rate = "
      << (m.bias ? "0.01" : "0") << "\nmuon_ns_dtype = \"float32\"\ndata = \"" << corpus
      << "\"\n[checkpoint]\nevery_steps = 5\n";
  testing::WorldOptions o;
  o.timeout = 180s;
  auto runs = testing::RunWorld(TRELLIS_TRAIN_BIN, m.world,
                                {spec_, "--json", "--checkpoint-dir", ckpt_}, dir_, o);
  std::string why;
  EXPECT_TRUE(testing::AllExitedZero(runs, &why)) << why;
  if (runs[0].records.size() != 6u) {
    ADD_FAILURE() << "trellis-train recorded " << runs[0].records.size() << " steps";
    return "";
  }

  // The run directory's spec.toml is found beside checkpoints/.
  out_ = JoinPath(dir_, "model");
  const Command c = RunShell(std::string(TRELLIS_EXPORT_BIN) + " " + dir_ + "@5 " + out_ +
                             " --max-file-size 40KB");
  EXPECT_EQ(c.status, 0) << c.output;
  EXPECT_NE(c.output.find("exported step 5 of " + ckpt_), std::string::npos) << c.output;

  const Json index = Json::parse(ReadText(JoinPath(out_, "model.safetensors.index.json")));
  std::map<std::string, StFile> files;
  for (const auto& [name, file] : index.at("weight_map").items())
    if (!files.count(file)) files[file] = ReadSafetensors(JoinPath(out_, file));
  EXPECT_GT(files.size(), 2u);
  want_ = FromShards(JoinPath(ckpt_, "step-00000005"), m);
  EXPECT_EQ(index.at("weight_map").size(), want_.size());
  int64_t bytes = 0;
  for (const auto& [name, file] : index.at("weight_map").items()) {
    const StFile& f = files[file];
    if (!f.values.count(name) || !want_.count(name)) {
      ADD_FAILURE() << name << (want_.count(name) ? " not in " + file.get<std::string>()
                                                  : " is not expected");
      continue;
    }
    EXPECT_EQ(f.dtypes.at(name), "F32") << name;
    EXPECT_EQ(f.shapes.at(name), want_[name].first) << name;
    EXPECT_EQ(f.values.at(name), want_[name].second) << name;  // bit for bit
    bytes += static_cast<int64_t>(f.values.at(name).size()) * 4;
  }
  int64_t in_files = 0;
  for (const auto& [file, f] : files) in_files += static_cast<int64_t>(f.values.size());
  EXPECT_EQ(in_files, static_cast<int64_t>(want_.size())) << "a tensor in no index entry";
  EXPECT_EQ(index.at("metadata").at("total_size"), bytes);

  // The exported model, run as its loader would, gives step 6's loss: the
  // weights after step 5 on step 6's batch.
  const std::string batches = JoinPath(dir_, "batches.safetensors");
  const Command b = RunShell(std::string(TRELLIS_EXPORT_BIN) + " " + spec_ + " --batches " +
                             batches + " --steps 6");
  EXPECT_EQ(b.status, 0) << b.output;
  const Command ref = RunShell("python3 " + std::string(TRELLIS_SOURCE_DIR) +
                               "/trainer_core/export/hf_reference.py " + out_ + " " + batches +
                               " 6");
  EXPECT_EQ(ref.status, 0) << ref.output;
  if (ref.status == 0) {
    const double loss = Json::parse(ref.output).at("loss");
    const double reported = runs[0].records[5].loss;
    std::printf("world %d, %s: step 6 loss: trellis-train %.7f, the export run by its loader "
                "%.7f\n",
                m.world, m.shared ? "qwen2_moe" : "mixtral", reported, loss);
    EXPECT_NEAR(loss, reported, 1e-5 * reported);
  }
  return c.output;
}

TEST_F(CheckpointExportTest, AWorld1ModelExportsAsMixtralWhole) {
  const std::string said = TrainExportAndCheck({/*world=*/1, /*shared=*/false, /*bias=*/false});
  EXPECT_NE(said.find("(Hugging Face Mixtral layout)"), std::string::npos) << said;
  EXPECT_EQ(said.find("note:"), std::string::npos) << said;
  const Json config = Json::parse(ReadText(JoinPath(out_, "config.json")));
  EXPECT_EQ(config.at("architectures"), Json::array({"MixtralForCausalLM"}));
  EXPECT_EQ(config.at("model_type"), "mixtral");
  EXPECT_EQ(config.at("num_local_experts"), kExperts);
  EXPECT_EQ(config.at("num_experts_per_tok"), 2);
  EXPECT_EQ(config.at("num_key_value_heads"), kKv);
  EXPECT_FALSE(config.contains("trellis_extensions"));
}

TEST_F(CheckpointExportTest, AWorld2ModelWithASharedExpertExportsAsQwen2Moe) {
  const std::string said = TrainExportAndCheck({/*world=*/2, /*shared=*/true, /*bias=*/true});
  EXPECT_NE(said.find("(Hugging Face Qwen2-MoE layout)"), std::string::npos) << said;
  EXPECT_NE(said.find("note: this model has what the layout has not (router_bias)"),
            std::string::npos)
      << said;
  // The bias moved (the run balanced), so its check is not of zeros.
  EXPECT_NE(want_["model.layers.0.mlp.gate.e_score_correction_bias"].second,
            std::vector<float>(kExperts, 0.0f));
  const Json config = Json::parse(ReadText(JoinPath(out_, "config.json")));
  EXPECT_EQ(config.at("architectures"), Json::array({"Qwen2MoeForCausalLM"}));
  EXPECT_EQ(config.at("model_type"), "qwen2_moe");
  EXPECT_EQ(config.at("num_experts"), kExperts);
  EXPECT_EQ(config.at("moe_intermediate_size"), kFfn);
  EXPECT_EQ(config.at("shared_expert_intermediate_size"), kFfn);
  EXPECT_EQ(config.at("norm_topk_prob"), true);
  EXPECT_EQ(config.at("trellis_extensions"), Json::array({"router_bias"}));

  // Nothing is mixed into an export, nor written for a spec that is not the
  // checkpoint's.
  Command again = RunShell(std::string(TRELLIS_EXPORT_BIN) + " " + dir_ + " " + out_);
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.output.find(out_ + " is not empty"), std::string::npos) << again.output;
  const std::string other = JoinPath(dir_, "other.toml");
  std::ofstream(other) << "[model]\nlayers = 2\nhidden = 64\n";
  again = RunShell(std::string(TRELLIS_EXPORT_BIN) + " " + ckpt_ + " " + JoinPath(dir_, "o2") +
                   " --spec " + other);
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.output.find("model.hidden is 32 in the checkpoint, 64 in the spec"),
            std::string::npos)
      << again.output;
  EXPECT_FALSE(PathExists(JoinPath(dir_, "o2")));

  // bf16: every value rounded to the nearest even.
  const std::string out16 = JoinPath(dir_, "model-bf16");
  const Command c16 = RunShell(std::string(TRELLIS_EXPORT_BIN) + " " + ckpt_ + "@5 " + out16 +
                               " --dtype bfloat16 --spec " + spec_);
  ASSERT_EQ(c16.status, 0) << c16.output;
  const StFile one = ReadSafetensors(JoinPath(out16, "model-00001-of-00001.safetensors"));
  ASSERT_EQ(one.values.size(), want_.size());
  for (const auto& [name, values] : one.values) {
    EXPECT_EQ(one.dtypes.at(name), "BF16") << name;
    std::vector<float> rounded;
    for (float v : want_[name].second) rounded.push_back(Bf16(v));
    EXPECT_EQ(values, rounded) << name;
  }
  EXPECT_EQ(Json::parse(ReadText(JoinPath(out16, "config.json"))).at("torch_dtype"), "bfloat16");
}

TEST_F(CheckpointExportTest, BadSourcesAndTargetsAreNamedAndNothingIsWritten) {
  const std::string ckpt = JoinPath(dir_, "checkpoints");
  MakeDirs(JoinPath(ckpt, "step-00000004"));  // no manifest: incomplete
  const std::string bin = TRELLIS_EXPORT_BIN;
  Command c = RunShell(bin + " " + ckpt + " " + JoinPath(dir_, "out"));
  EXPECT_EQ(c.status, 1);
  EXPECT_NE(c.output.find(ckpt + " holds no complete checkpoint"), std::string::npos) << c.output;
  c = RunShell(bin + " " + JoinPath(dir_, "nowhere") + "@3 " + JoinPath(dir_, "out"));
  EXPECT_EQ(c.status, 1);
  EXPECT_NE(c.output.find("is no directory"), std::string::npos) << c.output;
  c = RunShell(bin + " " + ckpt + "@x " + JoinPath(dir_, "out"));
  EXPECT_NE(c.output.find("\"x\" after '@' is not a step number or latest"), std::string::npos)
      << c.output;
  c = RunShell(bin + " " + ckpt + "@4 " + JoinPath(dir_, "out"));
  EXPECT_NE(c.output.find("has no complete checkpoint of step 4; its complete steps: none"),
            std::string::npos)
      << c.output;
  c = RunShell(bin + " " + ckpt + " --dtype float16 " + JoinPath(dir_, "out"));
  EXPECT_NE(c.status, 0);
  EXPECT_NE(c.output.find("float16"), std::string::npos) << c.output;
  EXPECT_FALSE(PathExists(JoinPath(dir_, "out")));
}

}  // namespace
}  // namespace trellis::train
