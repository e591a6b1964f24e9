#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <algorithm>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "trainer_core/data/synthetic.h"
#include "trainer_core/error.h"
#include "common/model_layout/model_layout.h"
#include "trainer_core/export/hf_layout.h"
#include "trainer_core/export/safetensors.h"

namespace trellis::train {
namespace {

std::string TempPath(const char* name) {
  return "/tmp/export_test_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(SafetensorsTest, HeaderAndDataFollowTheFormat) {
  const std::string path = TempPath("a.safetensors");
  std::vector<float> a{1.5f, -2.f, 3.f, 4.f, 5.f, 6.f};
  std::vector<int32_t> b{7, -1, 9};
  {
    SafetensorsWriter w(path, {{"a", StDtype::kF32, {2, 3}}, {"b", StDtype::kI32, {3}}},
                        {{"format", "pt"}});
    w.Write(a.data(), 24);
    w.Write(b.data(), 12);
    w.Finish();
  }
  auto bytes = ReadAll(path);
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  EXPECT_EQ(len % 8, 0u);
  auto header = nlohmann::json::parse(std::string(bytes.data() + 8, len));
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  EXPECT_EQ(header["a"]["dtype"], "F32");
  EXPECT_EQ(header["a"]["shape"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(header["a"]["data_offsets"], nlohmann::json::array({0, 24}));
  EXPECT_EQ(header["b"]["dtype"], "I32");
  EXPECT_EQ(header["b"]["data_offsets"], nlohmann::json::array({24, 36}));
  ASSERT_EQ(bytes.size(), 8 + len + 36);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + len, a.data(), 24), 0);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + len + 24, b.data(), 12), 0);
  std::remove(path.c_str());
}

TEST(SafetensorsTest, WrongSizesDuplicatesAndMissingTensorsAreErrors) {
  const std::string path = TempPath("b.safetensors");
  EXPECT_THROW(SafetensorsWriter(path, {{"x", StDtype::kF32, {1}}, {"x", StDtype::kF32, {1}}}, {}),
               TrainError);
  {
    SafetensorsWriter w(path, {{"x", StDtype::kF32, {2}}}, {});
    float v[3] = {};
    EXPECT_THROW(w.Write(v, 12), TrainError);
    EXPECT_THROW(w.Finish(), TrainError);
  }
  // An unfinished file never appears under its name.
  EXPECT_FALSE(std::ifstream(path).good());
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
}

// An export cut short (an error, a crash before Finish) leaves the previous
// file whole under the name, and no temporary file beside it.
TEST(SafetensorsTest, AnUnfinishedExportLeavesThePreviousFileAndNoTemporaryFile) {
  const std::string path = TempPath("c.safetensors");
  std::vector<float> a{1.f, 2.f};
  auto write = [&](bool finish) {
    SafetensorsWriter w(path, {{"a", StDtype::kF32, {2}}, {"b", StDtype::kF32, {2}}}, {});
    w.Write(a.data(), 8);
    if (!finish) return;
    w.Write(a.data(), 8);
    w.Finish();
  };
  write(true);
  const std::vector<char> previous = ReadAll(path);
  a[0] = 5.f;
  write(false);
  EXPECT_EQ(ReadAll(path), previous);
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
  write(true);
  EXPECT_NE(ReadAll(path), previous);
  EXPECT_EQ(ReadAll(path).size(), previous.size());
  std::remove(path.c_str());
}

TEST(SafetensorsTest, AFileThatCannotBeCreatedIsNamedWithTheReason) {
  const std::string path = TempPath("no-such-dir") + "/d.safetensors";
  try {
    SafetensorsWriter w(path, {{"a", StDtype::kF32, {2}}}, {});
    ADD_FAILURE() << "no error";
  } catch (const TrainError& e) {
    EXPECT_EQ(std::string(e.what()), path + ".tmp: cannot create: No such file or directory");
  }
}

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(Bf16Test, RoundsToTheNearestEvenAndKeepsNanAndInfinity) {
  EXPECT_EQ(Bf16Bits(1.0f), 0x3f80);
  EXPECT_EQ(Bf16Bits(FromBits(0x3f808000)), 0x3f80);  // a tie: to the even one below
  EXPECT_EQ(Bf16Bits(FromBits(0x3f818000)), 0x3f82);  // a tie: to the even one above
  EXPECT_EQ(Bf16Bits(FromBits(0x3f808001)), 0x3f81);  // above the tie
  EXPECT_EQ(Bf16Bits(-2.5f), 0xc020);
  EXPECT_EQ(Bf16Bits(FromBits(0x7f800000)), 0x7f80);  // infinity
  const uint16_t nan = Bf16Bits(FromBits(0x7f800001));  // a NaN whose payload rounds away
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
}

spec::TrainerSpec MoeSpec(bool shared, double bias_rate, int groups) {
  spec::TrainerSpec s;
  s.model.layers = 3;
  s.model.experts = 4;
  s.model.expert_groups = groups;
  s.model.shared_expert = shared;
  s.training.router_bias_rate = bias_rate;
  return s;
}

// Every element of every block is exported exactly once (the synthesized
// biases and gate aside), under a unique name: nothing lost, nothing twice.
TEST(HfLayoutTest, TheTensorsTileEveryBlockOnceUnderUniqueNames) {
  for (bool shared : {false, true}) {
    const spec::TrainerSpec s = MoeSpec(shared, shared ? 0.01 : 0, 1);
    const auto layout = ModelLayout(s.model);
    const auto tensors = HfTensors(s);
    std::set<std::string> names;
    std::vector<std::vector<std::pair<int64_t, int64_t>>> spans(layout.size());
    int biases = 0, zeros = 0;
    for (const HfTensor& t : tensors) {
      EXPECT_TRUE(names.insert(t.name).second) << t.name;
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      EXPECT_EQ(n, t.numel) << t.name;
      if (t.source == HfTensor::Source::kRouterBias) ++biases;
      if (t.source == HfTensor::Source::kZeros) ++zeros;
      if (t.source != HfTensor::Source::kSlice) continue;
      EXPECT_EQ(t.scale, t.name.find("shared_expert.down_proj") != std::string::npos ? 2 : 1)
          << t.name;
      spans[t.block].push_back({t.offset, t.offset + t.numel});
    }
    EXPECT_EQ(biases, shared ? 3 : 0);
    EXPECT_EQ(zeros, shared ? 3 * 4 : 0);  // Qwen2-MoE's q/k/v biases and shared gate
    for (size_t b = 0; b < layout.size(); ++b) {
      std::sort(spans[b].begin(), spans[b].end());
      int64_t at = 0;
      for (const auto& [begin, end] : spans[b]) {
        EXPECT_EQ(begin, at) << layout[b].name;
        at = end;
      }
      EXPECT_EQ(at, layout[b].numel) << layout[b].name;
    }
    // embed, final norm, head + per layer: 2 norms, 4 attention, the router,
    // 3 per expert; with a shared expert its 3, its gate, q/k/v biases and
    // the balancing bias.
    EXPECT_EQ(tensors.size(), 3u + 3u * (7 + 3 * 4 + (shared ? 8 : 0)));
  }
  const auto t = HfTensors(MoeSpec(false, 0, 1));
  EXPECT_EQ(t.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(t.back().name, "lm_head.weight");
  const auto w2 = std::find_if(t.begin(), t.end(), [](const HfTensor& x) {
    return x.name == "model.layers.1.block_sparse_moe.experts.2.w2.weight";
  });
  ASSERT_NE(w2, t.end());
  EXPECT_EQ(w2->shape, (std::vector<int64_t>{64, 128}));  // down: [hidden, expert_hidden]
  const auto q = HfTensors(MoeSpec(true, 0, 1));
  EXPECT_TRUE(std::any_of(q.begin(), q.end(), [](const HfTensor& x) {
    return x.name == "model.layers.0.mlp.experts.3.down_proj.weight";
  }));
}

TEST(HfLayoutTest, ASharedExpertTakesQwen2MoeAndTheRestIsAnExtension) {
  EXPECT_EQ(HfLayoutFor(MoeSpec(false, 0, 1).model), HfLayout::kMixtral);
  EXPECT_EQ(HfLayoutFor(MoeSpec(true, 0, 1).model), HfLayout::kQwen2Moe);
  EXPECT_TRUE(HfExtensions(MoeSpec(true, 0, 1)).empty());
  EXPECT_EQ(HfExtensions(MoeSpec(true, 0.01, 2)),
            (std::vector<std::string>{"router_bias", "expert_groups"}));
  const auto plain = HfConfig(MoeSpec(false, 0, 1), "float32", "run 1 step 2");
  EXPECT_FALSE(plain.contains("trellis_extensions"));
  EXPECT_EQ(plain.at("model_type"), "mixtral");
  EXPECT_EQ(plain.at("head_dim"), 16);
  EXPECT_EQ(plain.at("trellis_source"), "run 1 step 2");
  const auto qwen = HfConfig(MoeSpec(true, 0, 1), "float32", "x");
  EXPECT_EQ(qwen.at("architectures"), nlohmann::ordered_json::array({"Qwen2MoeForCausalLM"}));
  EXPECT_EQ(qwen.at("decoder_sparse_step"), 1);
  const auto grouped = HfConfig(MoeSpec(false, 0, 2), "bfloat16", "x");
  EXPECT_EQ(grouped.at("trellis_expert_groups"), 2);
  EXPECT_EQ(grouped.at("torch_dtype"), "bfloat16");
}

TEST(HfLayoutTest, FilesHoldConsecutiveTensorsUpToTheLimit) {
  std::vector<HfTensor> t(5);
  const int64_t sizes[] = {10, 10, 30, 5, 5};
  for (int i = 0; i < 5; ++i) t[i].numel = sizes[i];
  // 4-byte elements, 80 bytes a file: 10+10 | 30 (larger alone) | 5+5.
  EXPECT_EQ(HfFileStarts(t, 4, 80), (std::vector<size_t>{0, 2, 3}));
  EXPECT_EQ(HfFileStarts(t, 4, 1 << 20), (std::vector<size_t>{0}));
  EXPECT_EQ(HfFileName(1, 12), "model-00002-of-00012.safetensors");
}

TEST(SyntheticCorpusTest, SeededSkewedAndLearnable) {
  const Corpus a = SyntheticCorpus(1000, 200000, 7);
  EXPECT_EQ(a.tokens.ToVector(), SyntheticCorpus(1000, 200000, 7).tokens.ToVector());
  EXPECT_NE(a.tokens.ToVector(), SyntheticCorpus(1000, 200000, 8).tokens.ToVector());
  EXPECT_EQ(a.doc_starts.ToVector(), std::vector<uint64_t>{0});
  std::map<int, int64_t> unigram;
  std::map<std::pair<int, int>, int64_t> bigram;
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    ASSERT_LT(a.tokens[i], 1000);
    ++unigram[a.tokens[i]];
    if (i > 0) ++bigram[{a.tokens[i - 1], a.tokens[i]}];
  }
  EXPECT_GT(unigram[0], unigram[500] * 20);  // skewed towards small ids
  // Conditional entropy well under the unigram entropy: there is structure to learn.
  const double n = static_cast<double>(a.tokens.size());
  double h1 = 0, h2 = 0;
  for (auto& [t, c] : unigram) h1 -= c / n * std::log(c / n);
  for (auto& [tt, c] : bigram) h2 -= c / n * std::log(c / static_cast<double>(unigram[tt.first]));
  EXPECT_LT(h2, h1 - 1.0) << "unigram " << h1 << " nats, bigram " << h2;
}

}  // namespace
}  // namespace trellis::train
