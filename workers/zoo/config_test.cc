#include "workers/zoo/config.h"

#include <gtest/gtest.h>

#include <cmath>

#include "workers/zoo/model.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/zoo_test_util.h"

namespace ts::zoo {
namespace {

nlohmann::json SmallLlama() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", 1000},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4}};
}

TEST(ConfigTest, MissingHiddenSizeIsInvalidArgumentNamingTheField) {
  nlohmann::json c = SmallLlama();
  c.erase("hidden_size");
  auto r = ParseDecoderConfig(c, "llama");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "hidden_size: missing");
}

TEST(ConfigTest, NullCountsAsMissingForRequiredField) {
  nlohmann::json c = SmallLlama();
  c["vocab_size"] = nullptr;
  auto r = ParseDecoderConfig(c, "llama");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "vocab_size: missing");
}

TEST(ConfigTest, HeadsNotDividingHiddenNamesBothNumbers) {
  nlohmann::json c = SmallLlama();
  c["num_attention_heads"] = 5;
  c["num_key_value_heads"] = 5;
  auto r = ParseDecoderConfig(c, "llama");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "num_attention_heads: must divide hidden_size (64 % 5 != 0)");
  auto b = ParseBertConfig(c);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "num_attention_heads: must divide hidden_size (64 % 5 != 0)");
}

TEST(ConfigTest, StringVocabSizeReportsExpectedAndActualType) {
  nlohmann::json c = SmallLlama();
  c["vocab_size"] = "32000";
  auto r = ParseDecoderConfig(c, "llama");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "vocab_size: expected integer, got string");
}

TEST(ConfigTest, WrongTypesForDefaultedFieldsAreErrors) {
  nlohmann::json c = SmallLlama();
  c["rms_norm_eps"] = "tiny";
  EXPECT_EQ(ParseDecoderConfig(c, "llama").status().message(),
            "rms_norm_eps: expected number, got string");
  c = SmallLlama();
  c["tie_word_embeddings"] = 1;
  EXPECT_EQ(ParseDecoderConfig(c, "llama").status().message(),
            "tie_word_embeddings: expected boolean, got integer");
}

TEST(ConfigTest, KvHeadsMustDivideHeads) {
  nlohmann::json c = SmallLlama();
  c["num_key_value_heads"] = 3;
  EXPECT_EQ(ParseDecoderConfig(c, "llama").status().message(),
            "num_key_value_heads: must divide num_attention_heads (4 % 3 != 0)");
}

TEST(ConfigTest, NonPositiveSizeIsRejected) {
  nlohmann::json c = SmallLlama();
  c["num_hidden_layers"] = 0;
  EXPECT_EQ(ParseDecoderConfig(c, "llama").status().message(),
            "num_hidden_layers: must be positive (got 0)");
}

TEST(ConfigTest, UnknownRopeScalingTypeNamesTheNestedField) {
  nlohmann::json c = SmallLlama();
  c["rope_scaling"] = {{"type", "foo"}, {"factor", 2.0}};
  EXPECT_EQ(ParseDecoderConfig(c, "llama").status().message(), "rope_scaling.type: unknown 'foo'");
  c["rope_scaling"] = {{"rope_type", "linear"}};
  EXPECT_EQ(ParseDecoderConfig(c, "llama").status().message(), "rope_scaling.factor: missing");
}

TEST(ConfigTest, UnknownActivationNamesTheField) {
  nlohmann::json c = SmallLlama();
  c["hidden_act"] = "mish2";
  EXPECT_EQ(ParseDecoderConfig(c, "llama").status().message(), "hidden_act: unknown 'mish2'");
}

TEST(ConfigTest, AbsentFieldsTakeTransformersDefaults) {
  auto r = ParseDecoderConfig(SmallLlama(), "llama");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->num_key_value_heads, 4);  // = num_attention_heads
  EXPECT_EQ(r->head_dim, 16);
  EXPECT_DOUBLE_EQ(r->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(r->rope.theta, 10000.0);
  EXPECT_EQ(r->rope.kind, RopeKind::kDefault);
  EXPECT_FALSE(r->tie_word_embeddings);
  EXPECT_EQ(r->hidden_act, Activation::kSilu);
  EXPECT_EQ(r->max_position_embeddings, 2048);
  EXPECT_FALSE(r->qkv_bias);
  EXPECT_FALSE(r->layer_window[0].has_value());

  auto q = ParseDecoderConfig(SmallLlama(), "qwen2");
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->qkv_bias);
  EXPECT_FALSE(q->layer_window[1].has_value());  // use_sliding_window defaults to false
}

TEST(ConfigTest, MistralWindowDefaultsTo4096AndNullDisablesIt) {
  nlohmann::json c = SmallLlama();
  auto absent = ParseDecoderConfig(c, "mistral");
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(absent->layer_window[0], std::optional<int64_t>(4096));
  c["sliding_window"] = nullptr;
  auto null = ParseDecoderConfig(c, "mistral");
  ASSERT_TRUE(null.ok());
  EXPECT_FALSE(null->layer_window[0].has_value());
}

TEST(ConfigTest, Qwen2WindowsLayersFromMaxWindowLayersWhenEnabled) {
  nlohmann::json c = SmallLlama();
  c["num_hidden_layers"] = 4;
  c["use_sliding_window"] = true;
  c["sliding_window"] = 16;
  c["max_window_layers"] = 2;
  auto r = ParseDecoderConfig(c, "qwen2");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->layer_window[1].has_value());
  EXPECT_EQ(r->layer_window[2], std::optional<int64_t>(16));
  EXPECT_EQ(r->layer_window[3], std::optional<int64_t>(16));
}

TEST(ConfigTest, Llama3RopeScalingFromRealConfigParses) {
  nlohmann::json c = testing::LoadHfConfig("llama3_1_70b.json");
  ASSERT_TRUE(c.is_object());
  auto r = ParseDecoderConfig(c, "llama");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rope.kind, RopeKind::kLlama3);
  EXPECT_DOUBLE_EQ(r->rope.factor, 8.0);
  EXPECT_DOUBLE_EQ(r->rope.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(r->rope.high_freq_factor, 4.0);
  EXPECT_EQ(r->rope.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(r->rope.theta, 500000.0);
  EXPECT_EQ(r->num_key_value_heads, 8);
}

TEST(ConfigTest, YarnAttentionFactorDefaultsToMscaleOfFactor) {
  nlohmann::json c = SmallLlama();
  c["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 512}};
  auto r = ParseDecoderConfig(c, "llama");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rope.kind, RopeKind::kYarn);
  EXPECT_NEAR(r->rope.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-12);
  EXPECT_EQ(r->rope.original_max_position_embeddings, 512);
}

TEST(ConfigTest, NumLabelsComesFromId2LabelThenNumLabelsThenTwo) {
  nlohmann::json c = {{"id2label", {{"0", "a"}, {"1", "b"}, {"2", "c"}}}};
  EXPECT_EQ(*ParseNumLabels(c), 3);
  EXPECT_EQ(*ParseNumLabels(nlohmann::json{{"num_labels", 5}}), 5);
  EXPECT_EQ(*ParseNumLabels(nlohmann::json::object()), 2);
}

TEST(ConfigTest, BertPadTokenDefaultsToZero) {
  nlohmann::json c = SmallLlama();
  auto r = ParseBertConfig(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pad_token_id, std::optional<int64_t>(0));
  EXPECT_EQ(r->hidden_act, Activation::kGeluErf);
  EXPECT_DOUBLE_EQ(r->layer_norm_eps, 1e-12);
}

// transformers 5 configs keep RoPE in `rope_parameters` (modeling_rope_utils.py
// RotaryEmbeddingConfigMixin.convert_rope_params_to_dict: `rope_scaling or rope_parameters`,
// then setdefault("rope_theta", the top-level rope_theta)).
TEST(ConfigTest, RopeParametersOfATransformers5ConfigAreRead) {
  const nlohmann::json real = testing::LoadHfConfig("ministral3_3b_2512.json");
  ASSERT_TRUE(real.is_object());
  nlohmann::json text = real["text_config"];
  text["architectures"] = {"MistralForCausalLM"};
  text["vocab_size"] = 131072;
  auto r = ParseDecoderConfig(text, "mistral");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rope.kind, RopeKind::kYarn);
  EXPECT_DOUBLE_EQ(r->rope.theta, 1e6);
  EXPECT_DOUBLE_EQ(r->rope.factor, 16.0);
  EXPECT_EQ(r->rope.original_max_position_embeddings, 16384);
  EXPECT_DOUBLE_EQ(r->rope.beta_fast, 32.0);
  // mscale == mscale_all_dim: get_mscale(16, 1) / get_mscale(16, 1).
  EXPECT_DOUBLE_EQ(r->rope.attention_factor, 1.0);
  // The tiny config scales the original context inside rope_parameters (16384 / 262144 * 64,
  // clamped to [16, 64]).
  auto m = BuildModel(text, BuildOptions());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const nlohmann::json& tiny = (*m)->spec().tiny_config;
  EXPECT_EQ(tiny["rope_parameters"]["original_max_position_embeddings"], 16);
  EXPECT_FALSE(tiny.contains("rope_scaling"));
}

TEST(ConfigTest, RopeDictWinsOverTopLevelThetaAndRopeScalingOverRopeParameters) {
  nlohmann::json c = SmallLlama();
  c["rope_theta"] = 5e5;
  c["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 1e6}};
  auto r = ParseDecoderConfig(c, "llama");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rope.kind, RopeKind::kLinear);
  EXPECT_DOUBLE_EQ(r->rope.factor, 4.0);
  EXPECT_DOUBLE_EQ(r->rope.theta, 1e6);
  c["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  r = ParseDecoderConfig(c, "llama");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rope.kind, RopeKind::kDynamic);
  EXPECT_DOUBLE_EQ(r->rope.theta, 5e5);  // rope_scaling has none: the top-level one
  c["rope_scaling"] = nlohmann::json::object();  // empty: falsy, rope_parameters again
  r = ParseDecoderConfig(c, "llama");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rope.kind, RopeKind::kLinear);
  c["rope_parameters"] = {{"rope_type", "yarn"}};
  EXPECT_EQ(ParseDecoderConfig(c, "llama").status().message(), "rope_parameters.factor: missing");
  c["rope_parameters"] = 3;
  EXPECT_EQ(ParseDecoderConfig(c, "llama").status().message(),
            "rope_parameters: expected object, got integer");
}

TEST(ConfigTest, RopeParametersNestedByLayerTypeArePickedPerLayerType) {
  nlohmann::json c = SmallLlama();
  c["rope_parameters"] = {
      {"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  auto full = ParseRope(c, 2048);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->kind, RopeKind::kLinear);
  EXPECT_DOUBLE_EQ(full->factor, 8.0);
  EXPECT_DOUBLE_EQ(full->theta, 1e6);
  auto local = ParseRope(c, 2048, "sliding_attention");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->kind, RopeKind::kDefault);
  EXPECT_DOUBLE_EQ(local->theta, 1e4);
}

// transformers' _compute_dynamic_ntk_parameters: base * (factor * seq / max_pos - (factor -
// 1)) ** (dim / (dim - 2)) with max_pos = config.max_position_embeddings, whatever
// original_max_position_embeddings the RoPE dict carries.
TEST(ConfigTest, DynamicNtkScalesPastMaxPositionEmbeddings) {
  nlohmann::json c = SmallLlama();
  c["max_position_embeddings"] = 16;
  c["rope_scaling"] = {
      {"rope_type", "dynamic"}, {"factor", 2.0}, {"original_max_position_embeddings", 8}};
  auto r = ParseDecoderConfig(c, "llama");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rope.max_position_embeddings, 16);
  const int64_t dim = 16, seq = 32;
  const at::Tensor pos = at::arange(seq, at::kLong);
  const at::Tensor cos = nn::RotaryCosSin(r->rope, dim, pos, at::kDouble).first;
  const double d = static_cast<double>(dim);
  const double base = 10000.0 * std::pow(2.0 * seq / 16.0 - 1.0, d / (d - 2.0));
  const at::Tensor inv =
      1.0 / at::pow(base, at::arange(0, dim, 2, at::kDouble) / d);  // [dim / 2]
  const at::Tensor ang = at::outer(pos.to(at::kDouble), inv);
  const at::Tensor want = at::cos(at::cat({ang, ang}, -1));
  EXPECT_LT((cos.reshape(want.sizes()) - want).abs().max().item<double>(), 1e-9);
}

}  // namespace
}  // namespace ts::zoo
