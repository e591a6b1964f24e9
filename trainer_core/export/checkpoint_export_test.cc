// trellis-export of a trained checkpoint, as a user runs it: a world-2 run of
// trellis-train (2 processes over gloo) saves step 5 in two shards; the export
// is read back with a safetensors reader written here from the format's
// description, and every tensor is compared with the shards' elements,
// gathered here by the layout the trainer documents (dense state flat-sharded
// rank after rank, experts owned in halves, [gate, up, down][experts][out
// in]). mixtral_reference.py then runs the exported model as a Mixtral loader
// would and must give the loss trellis-train reported for step 6, whose
// weights are step 5's. Torch-free: it spawns the binaries.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
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

class CheckpointExportTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("trellis-export-test"); }
  void TearDown() override { RemoveTree(dir_); }
  std::string dir_;
};

// Every tensor the export must hold, gathered from the two shards.
std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> FromShards(
    const std::string& step_dir) {
  ShardReader r0(JoinPath(step_dir, "shard-00000-of-00002.bin"));
  ShardReader r1(JoinPath(step_dir, "shard-00001-of-00002.bin"));
  auto floats = [](const ShardReader& r, const std::string& name) {
    const ShardEntry* e = r.Find(name);
    EXPECT_NE(e, nullptr) << r.path() << " " << name;
    if (!e) return std::vector<float>{};
    const std::string d = r.ReadBytes(*e);
    std::vector<float> v(d.size() / 4);
    std::memcpy(v.data(), d.data(), d.size());
    return v;
  };
  auto dense = [&](const std::string& name, int64_t numel) {  // rank 0's part, then rank 1's
    std::vector<float> all = floats(r0, name), second = floats(r1, name);
    all.insert(all.end(), second.begin(), second.end());
    all.resize(numel);  // padding at the end
    return all;
  };
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> want;
  auto take = [&](const std::string& name, std::vector<int64_t> shape,
                  const std::vector<float>& from, int64_t* at) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    want[name] = {shape, std::vector<float>(from.begin() + *at, from.begin() + *at + n)};
    *at += n;
  };
  int64_t at = 0;
  take("model.embed_tokens.weight", {kVocab, kHidden}, dense("param.embed", kVocab * kHidden),
       &at);
  const int64_t layer_dense = 2 * kHidden + 2 * kHeads * kHd * kHidden +
                              2 * kKv * kHd * kHidden + kExperts * kHidden + 3 * kFfn * kHidden;
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
    const std::string moe = p + "block_sparse_moe.";
    take(moe + "gate.weight", {kExperts, kHidden}, d, &at);
    take(moe + "shared_expert.gate_proj.weight", {kFfn, kHidden}, d, &at);
    take(moe + "shared_expert.up_proj.weight", {kFfn, kHidden}, d, &at);
    take(moe + "shared_expert.down_proj.weight", {kHidden, kFfn}, d, &at);
    EXPECT_EQ(at, layer_dense);
    want[moe + "gate.e_score_correction_bias"] = {{kExperts}, floats(r0, "router_bias." + block)};
    // Each rank: [gate, up, down] x its half of the experts x [out in].
    const std::vector<float> halves[2] = {floats(r0, "param.experts." + block),
                                          floats(r1, "param.experts." + block)};
    const int64_t fh = kFfn * kHidden, half = kExperts / 2;
    const char* names[3] = {"w1", "w3", "w2"};  // gate, up, down
    for (int part = 0; part < 3; ++part)
      for (int64_t e = 0; e < kExperts; ++e) {
        const std::vector<float>& src = halves[e / half];
        const int64_t first = (part * half + e % half) * fh;
        want[moe + "experts." + std::to_string(e) + "." + names[part] + ".weight"] = {
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

TEST_F(CheckpointExportTest, AWorld2CheckpointExportsEveryTensorAndRunsAsMixtral) {
  BuildStats stats;
  const std::string corpus = JoinPath(dir_, "corpus.bin");
  WriteCorpus(corpus, BuildByteCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"}, &stats));
  const std::string spec = JoinPath(dir_, "spec.toml"), ckpt = JoinPath(dir_, "checkpoints");
  std::ofstream(spec)
      << "[model]\nlayers = 2\nhidden = 32\nheads = 4\nkv_heads = 2\nexperts = 4\n"
         "experts_per_token = 2\nexpert_hidden = 32\nshared_expert = true\n"
         "[parallel]\nnode_size = 2\nep = 2\ngrad_reduce_dtype = \"float32\"\n"
         "[training]\ndtype = \"float32\"\nseq_len = 32\nglobal_batch = 4\nsteps = 6\n"
         "warmup_steps = 2\nrouter_bias_rate = 0.01\nmuon_ns_dtype = \"float32\"\ndata = \""
      << corpus << "\"\n[checkpoint]\nevery_steps = 5\n";
  testing::WorldOptions o;
  o.timeout = 180s;
  auto runs = testing::RunWorld(TRELLIS_TRAIN_BIN, 2, {spec, "--json", "--checkpoint-dir", ckpt},
                                dir_, o);
  std::string why;
  ASSERT_TRUE(testing::AllExitedZero(runs, &why)) << why;
  ASSERT_EQ(runs[0].records.size(), 6u);

  // The run directory's spec.toml is found beside checkpoints/; files of
  // at most 40 kB, so the export is several.
  const std::string out = JoinPath(dir_, "model");
  const Command c = RunShell(std::string(TRELLIS_EXPORT_BIN) + " " + dir_ + "@5 " + out +
                       " --max-file-size 40KB");
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_NE(c.output.find("exported step 5 of " + ckpt), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("shared_expert, router_bias"), std::string::npos) << c.output;

  const Json index = Json::parse(ReadText(JoinPath(out, "model.safetensors.index.json")));
  std::map<std::string, StFile> files;
  for (const auto& [name, file] : index.at("weight_map").items())
    if (!files.count(file)) files[file] = ReadSafetensors(JoinPath(out, file));
  EXPECT_GT(files.size(), 2u);
  auto want = FromShards(JoinPath(ckpt, "step-00000005"));
  EXPECT_EQ(index.at("weight_map").size(), want.size());
  int64_t bytes = 0;
  for (const auto& [name, file] : index.at("weight_map").items()) {
    const StFile& f = files[file];
    ASSERT_TRUE(f.values.count(name)) << name << " not in " << file;
    ASSERT_TRUE(want.count(name)) << "unexpected tensor " << name;
    EXPECT_EQ(f.dtypes.at(name), "F32") << name;
    EXPECT_EQ(f.shapes.at(name), want[name].first) << name;
    EXPECT_EQ(f.values.at(name), want[name].second) << name;  // bit for bit
    bytes += static_cast<int64_t>(f.values.at(name).size()) * 4;
  }
  int64_t in_files = 0;
  for (const auto& [file, f] : files) in_files += static_cast<int64_t>(f.values.size());
  EXPECT_EQ(in_files, static_cast<int64_t>(want.size())) << "a tensor in no index entry";
  EXPECT_EQ(index.at("metadata").at("total_size"), bytes);
  // The router bias moved (the run balanced), so the check of it is not of zeros.
  EXPECT_NE(want["model.layers.0.block_sparse_moe.gate.e_score_correction_bias"].second,
            std::vector<float>(kExperts, 0.0f));

  const Json config = Json::parse(ReadText(JoinPath(out, "config.json")));
  EXPECT_EQ(config.at("architectures"), Json::array({"MixtralForCausalLM"}));
  EXPECT_EQ(config.at("num_local_experts"), kExperts);
  EXPECT_EQ(config.at("num_experts_per_tok"), 2);
  EXPECT_EQ(config.at("num_key_value_heads"), kKv);
  EXPECT_EQ(config.at("trellis_extensions"), Json::array({"shared_expert", "router_bias"}));

  // Nothing is mixed into an export, nor written for a spec that is not the
  // checkpoint's.
  Command again = RunShell(std::string(TRELLIS_EXPORT_BIN) + " " + dir_ + " " + out);
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.output.find(out + " is not empty"), std::string::npos) << again.output;
  const std::string other = JoinPath(dir_, "other.toml");
  std::ofstream(other) << "[model]\nlayers = 2\nhidden = 64\n";
  again = RunShell(std::string(TRELLIS_EXPORT_BIN) + " " + ckpt + " " + JoinPath(dir_, "o2") +
              " --spec " + other);
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.output.find("model.hidden is 32 in the checkpoint, 64 in the spec"),
            std::string::npos)
      << again.output;
  EXPECT_FALSE(PathExists(JoinPath(dir_, "o2")));

  // The exported model, run as Mixtral, gives step 6's loss: the weights
  // after step 5 on step 6's batch.
  const std::string batches = JoinPath(dir_, "batches.safetensors");
  const Command b = RunShell(std::string(TRELLIS_EXPORT_BIN) + " " + spec + " --batches " + batches +
                        " --steps 6");
  ASSERT_EQ(b.status, 0) << b.output;
  const Command ref = RunShell("python3 " + std::string(TRELLIS_SOURCE_DIR) +
                          "/trainer_core/export/mixtral_reference.py " + out + " " + batches +
                          " 6");
  ASSERT_EQ(ref.status, 0) << ref.output;
  const double loss = Json::parse(ref.output).at("loss");
  const double reported = runs[0].records[5].loss;
  std::printf("step 6 loss: trellis-train %.7f, exported model as Mixtral %.7f\n", reported, loss);
  EXPECT_NEAR(loss, reported, 1e-5 * reported);

  // bf16: every value rounded to the nearest even.
  const std::string out16 = JoinPath(dir_, "model-bf16");
  const Command c16 = RunShell(std::string(TRELLIS_EXPORT_BIN) + " " + ckpt + "@5 " + out16 +
                          " --dtype bfloat16 --spec " + spec);
  ASSERT_EQ(c16.status, 0) << c16.output;
  const StFile one = ReadSafetensors(JoinPath(out16, "model-00001-of-00001.safetensors"));
  ASSERT_EQ(one.values.size(), want.size());
  for (const auto& [name, values] : one.values) {
    EXPECT_EQ(one.dtypes.at(name), "BF16") << name;
    std::vector<float> rounded;
    for (float v : want[name].second) rounded.push_back(Bf16(v));
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
