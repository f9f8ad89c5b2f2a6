#include "workers/zoo/scaling.h"

#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "workers/zoo/config.h"
#include "workers/zoo/model.h"
#include "workers/zoo/zoo_test_util.h"

namespace ts::zoo {
namespace {

std::string DecoderFamily(const std::string& arch) {
  if (arch.rfind("Mistral", 0) == 0) return "mistral";
  if (arch.rfind("Qwen2", 0) == 0) return "qwen2";
  return "llama";
}

TEST(ScalingTest, EveryRealDecoderConfigKeepsGqaRatioAndShrinks) {
  int checked = 0;
  for (const std::string& file : testing::HfConfigFiles()) {
    nlohmann::json c = testing::LoadHfConfig(file);
    if (!c.is_object() || !c.contains("architectures")) continue;
    const std::string arch = c["architectures"][0].get<std::string>();
    if (arch != "LlamaForCausalLM" && arch != "MistralForCausalLM" && arch != "Qwen2ForCausalLM") {
      continue;
    }
    SCOPED_TRACE(file);
    const std::string family = DecoderFamily(arch);
    auto real = ParseDecoderConfig(c, family);
    ASSERT_TRUE(real.ok()) << real.status().ToString();
    auto tiny_json = ScaleToTiny(c, family);
    ASSERT_TRUE(tiny_json.ok()) << tiny_json.status().ToString();
    auto tiny = ParseDecoderConfig(*tiny_json, family);
    ASSERT_TRUE(tiny.ok()) << tiny.status().ToString();
    const int64_t ratio = real->num_attention_heads / real->num_key_value_heads;
    if (ratio <= TinyProfile::kMaxHeads) {
      EXPECT_EQ(tiny->num_attention_heads / tiny->num_key_value_heads, ratio);
    }
    EXPECT_LE(tiny->hidden_size, 64);
    EXPECT_GE(tiny->hidden_size, 32);
    EXPECT_GE(tiny->head_dim, 8);
    EXPECT_EQ(tiny->head_dim % 2, 0);
    // One layer when the real layers are alike, two when their windows differ.
    EXPECT_EQ(tiny->num_hidden_layers, VariesByLayer(real->layer_window) ? 2 : 1);
    EXPECT_EQ(tiny->vocab_size, 512);
    EXPECT_EQ(tiny->tie_word_embeddings, real->tie_word_embeddings);
    EXPECT_EQ(tiny->hidden_act, real->hidden_act);
    EXPECT_EQ(tiny->rope.kind, real->rope.kind);
    const double real_ratio =
        static_cast<double>(real->intermediate_size) / static_cast<double>(real->hidden_size);
    const double tiny_ratio =
        static_cast<double>(tiny->intermediate_size) / static_cast<double>(tiny->hidden_size);
    EXPECT_NEAR(tiny_ratio, real_ratio, 0.05 * real_ratio);
    EXPECT_EQ((*tiny_json)["touchstone_tiny"]["seq_len"], 32);
    ++checked;
  }
  EXPECT_GE(checked, 12);
}

TEST(ScalingTest, MistralWindowShrinksSoItBitesWithinTheTinySequence) {
  auto t = ScaleToTiny(testing::LoadHfConfig("mistral_7b.json"), "mistral");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)["sliding_window"], TinyProfile::kWindow);
  auto c = ParseDecoderConfig(*t, "mistral");
  ASSERT_TRUE(c.ok());
  for (const auto& w : c->layer_window) EXPECT_EQ(w, std::optional<int64_t>(8));
  EXPECT_EQ(c->num_hidden_layers, 1);  // every layer windowed: alike
  EXPECT_LT(TinyProfile::kWindow, TinyProfile::kSeqLen);
}

TEST(ScalingTest, TinyDepthIsOneForAlikeLayersAndTwoForMixedOnes) {
  EXPECT_EQ(TinyDepth(32, false), 1);
  EXPECT_EQ(TinyDepth(32, true), 2);
  EXPECT_EQ(TinyDepth(1, true), 1);  // never deeper than the real model
  EXPECT_FALSE(VariesByLayer(std::vector<std::optional<int64_t>>(4, 8)));
  EXPECT_TRUE(VariesByLayer(std::vector<std::optional<int64_t>>{std::nullopt, 8, 8}));
  EXPECT_FALSE(VariesByLayer(std::vector<bool>{}));
}

TEST(ScalingTest, Qwen2WindowPatternBecomesFullThenWindowed) {
  nlohmann::json c = testing::LoadHfConfig("qwen2_1_5b.json");
  c["use_sliding_window"] = true;
  c["max_window_layers"] = 21;
  auto t = ScaleToTiny(c, "qwen2");
  ASSERT_TRUE(t.ok());
  auto p = ParseDecoderConfig(*t, "qwen2");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->num_hidden_layers, 2);  // one full layer, one windowed
  EXPECT_FALSE(p->layer_window[0].has_value());
  EXPECT_EQ(p->layer_window[1], std::optional<int64_t>(8));
}

TEST(ScalingTest, Llama3RopeKeepsKindAndFactorsAndRescalesOriginalContext) {
  auto t = ScaleToTiny(testing::LoadHfConfig("llama3_2_3b.json"), "llama");
  ASSERT_TRUE(t.ok());
  const auto& rs = (*t)["rope_scaling"];
  EXPECT_EQ(rs["rope_type"], "llama3");
  EXPECT_EQ(rs["factor"], 32.0);
  EXPECT_EQ(rs["low_freq_factor"], 1.0);
  EXPECT_EQ(rs["high_freq_factor"], 4.0);
  const int64_t orig = rs["original_max_position_embeddings"].get<int64_t>();
  EXPECT_GE(orig, TinyProfile::kSeqLen / 2);
  EXPECT_LE(orig, (*t)["max_position_embeddings"].get<int64_t>());
  EXPECT_EQ((*t)["tie_word_embeddings"], true);
  EXPECT_EQ((*t)["head_dim"].get<int64_t>() * (*t)["num_attention_heads"].get<int64_t>(),
            (*t)["hidden_size"].get<int64_t>());
}

TEST(ScalingTest, DynamicRopeMaxPositionsDropBelowTheTinySequence) {
  nlohmann::json c = testing::LoadHfConfig("llama2_7b.json");
  c["rope_scaling"] = {{"type", "dynamic"}, {"factor", 4.0}};
  auto t = ScaleToTiny(c, "llama");
  ASSERT_TRUE(t.ok());
  EXPECT_LT((*t)["max_position_embeddings"].get<int64_t>(), TinyProfile::kSeqLen);
  EXPECT_EQ((*t)["rope_scaling"]["type"], "dynamic");
}

TEST(ScalingTest, OutOfVocabTokenIdsMapIntoTinyVocab) {
  auto t = ScaleToTiny(testing::LoadHfConfig("llama3_2_3b.json"), "llama");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)["bos_token_id"], 511);
  for (const auto& e : (*t)["eos_token_id"]) EXPECT_EQ(e, 511);
}

TEST(ScalingTest, VitBaseLiteralScalesImagePatchAndLabels) {
  auto t = ScaleToTiny(testing::VitBaseConfig(), "vit");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)["image_size"], 32);
  EXPECT_EQ((*t)["patch_size"], 8);
  EXPECT_EQ((*t)["hidden_size"], 64);
  EXPECT_EQ((*t)["num_attention_heads"], 4);
  EXPECT_EQ((*t)["intermediate_size"], 256);
  EXPECT_EQ((*t)["num_hidden_layers"], 1);
  EXPECT_EQ((*t)["num_labels"], 10);
  EXPECT_FALSE(t->contains("id2label"));
}

TEST(ScalingTest, BertKeepsNormAndActivationKinds) {
  nlohmann::json c = testing::LoadHfConfig("snowflake-arctic-embed-m.json");
  auto t = ScaleToTiny(c, "bert");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)["hidden_act"], "gelu");
  EXPECT_EQ((*t)["layer_norm_eps"], 1e-12);
  EXPECT_EQ((*t)["vocab_size"], 512);
  EXPECT_EQ((*t)["max_position_embeddings"], 64);
  EXPECT_EQ((*t)["type_vocab_size"], 2);
}

TEST(ScalingTest, InvalidRealConfigFailsBeforeScaling) {
  nlohmann::json c = testing::LoadHfConfig("llama2_7b.json");
  c["num_attention_heads"] = 33;
  c["num_key_value_heads"] = 33;
  auto t = ScaleToTiny(c, "llama");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "num_attention_heads: must divide hidden_size (4096 % 33 != 0)");
}

}  // namespace
}  // namespace ts::zoo
