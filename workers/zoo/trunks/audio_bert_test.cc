// wav2vec2-bert (families/wav2vec2_bert.cc, trunks/audio_conformer.cc) against a reference written
// here from modular_wav2vec2_bert.py, in double from at:: ops (at::conv1d with the causal left
// padding, at::glu, at::einsum for the relative_key term), never from the zoo's own trunk.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"
#include "workers/zoo/trunks/audio_formula_test_util.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;
using testing::LinWithBias;
using testing::Ln;

// Wav2Vec2BertSelfAttention.forward with position_embeddings_type relative_key or null.
at::Tensor Attention(const WeightMap& w, const std::string& p, const json& c, const at::Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2);
  const int64_t heads = c.at("num_attention_heads").get<int64_t>(), hd = h / heads;
  auto split = [&](const at::Tensor& y) { return y.view({b, t, heads, hd}).transpose(1, 2); };
  at::Tensor q = split(LinWithBias(w, p + "linear_q", x)),
             k = split(LinWithBias(w, p + "linear_k", x));
  at::Tensor v = split(LinWithBias(w, p + "linear_v", x));
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
  if (c.value("position_embeddings_type", json("relative_key")) == "relative_key") {
    const int64_t left = c.at("left_max_position_embeddings").get<int64_t>();
    const int64_t right = c.at("right_max_position_embeddings").get<int64_t>();
    at::Tensor l = at::arange(t, at::kLong).view({-1, 1}),
               r = at::arange(t, at::kLong).view({1, -1});
    at::Tensor distance = at::clamp(r - l, -left, right);
    at::Tensor pe = at::embedding(w.at(p + "distance_embedding.weight"), distance + left);
    scores = scores + at::einsum("bhld,lrd->bhlr", {q, pe}) / std::sqrt(static_cast<double>(hd));
  }
  at::Tensor ctx = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({b, t, h});
  return LinWithBias(w, p + "linear_out", ctx);
}

// Wav2Vec2BertConvolutionModule.forward without a mask.
at::Tensor ConvModule(const WeightMap& w, const std::string& p, const json& c, const at::Tensor& x,
                      double eps) {
  const int64_t h = x.size(2), k = c.at("conv_depthwise_kernel_size").get<int64_t>();
  at::Tensor y = Ln(w, p + "layer_norm", x, eps).transpose(1, 2);
  y = at::glu(at::conv1d(y, w.at(p + "pointwise_conv1.weight")), 1);
  y = at::constant_pad_nd(y, {k - 1, 0});
  y = at::conv1d(y, w.at(p + "depthwise_conv.weight"), {}, at::IntArrayRef{1}, at::IntArrayRef{0},
                 at::IntArrayRef{1}, h);
  y = Ln(w, p + "depthwise_layer_norm", y.transpose(1, 2), eps).transpose(1, 2);
  y = at::conv1d(at::silu(y), w.at(p + "pointwise_conv2.weight"));
  return y.transpose(1, 2);
}

// Wav2Vec2BertModel.forward (no adapter): {last_hidden_state, extract_features}; `states` gets
// the encoder's hidden states.
std::vector<at::Tensor> RefBert(const WeightMap& w, const std::string& p, const json& c,
                                const at::Tensor& features, std::vector<at::Tensor>* states) {
  const double eps = c.value("layer_norm_eps", 1e-5);
  at::Tensor norm = Ln(w, p + "feature_projection.layer_norm", features, eps);
  at::Tensor hs = LinWithBias(w, p + "feature_projection.projection", norm);
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    if (states) states->push_back(hs);
    const std::string lp = p + "encoder.layers." + std::to_string(i) + ".";
    auto ffn = [&](const std::string& f, const at::Tensor& y) {
      return LinWithBias(w, f + ".output_dense",
                         at::silu(LinWithBias(w, f + ".intermediate_dense", y)));
    };
    hs = ffn(lp + "ffn1", Ln(w, lp + "ffn1_layer_norm", hs, eps)) * 0.5 + hs;
    hs = Attention(w, lp + "self_attn.", c, Ln(w, lp + "self_attn_layer_norm", hs, eps)) + hs;
    hs = hs + ConvModule(w, lp + "conv_module.", c, hs, eps);
    hs = ffn(lp + "ffn2", Ln(w, lp + "ffn2_layer_norm", hs, eps)) * 0.5 + hs;
    hs = Ln(w, lp + "final_layer_norm", hs, eps);
  }
  if (states) states->push_back(hs);
  return {hs, norm};
}

void ExpectModelMatches(const json& config) {
  SCOPED_TRACE(config.dump());
  auto m = testing::Build("Wav2Vec2BertModel", config);
  ASSERT_TRUE(m);
  const WeightMap w = m->InitWeights(7, at::kDouble);
  Batch b = m->MakeBatch(2, 2);
  ASSERT_EQ(b.inputs.count("input_features"), 1u);
  b.inputs["input_features"] = b.inputs.at("input_features").to(at::kDouble);
  const std::vector<at::Tensor> got = m->Forward(w, b.inputs);
  const std::vector<at::Tensor> want =
      RefBert(w, "", m->spec().tiny_config, b.inputs.at("input_features"), nullptr);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_LT(testing::RelDiff(got[0], want[0]), 1e-10);
  EXPECT_LT(testing::RelDiff(got[1], want[1]), 1e-10);
}

// input_features through the feature projection, the relative_key distance term (its clamps
// reached at the tiny 8 / 4), the causal depthwise conv with depthwise_layer_norm, no final norm.
TEST(AudioBertTest, ConformerOnInputFeaturesAsTransformers) {
  json c = *ExampleConfig("Wav2Vec2BertModel");
  ExpectModelMatches(c);
  c["position_embeddings_type"] = nullptr;
  ExpectModelMatches(c);
  auto m = testing::Build("Wav2Vec2BertModel");
  ASSERT_TRUE(m);
  const json& t = m->spec().tiny_config;
  EXPECT_EQ(t.at("left_max_position_embeddings").get<int64_t>(), 8);
  EXPECT_EQ(testing::WeightShape(*m, "feature_projection.projection.weight")[1], 32);
  EXPECT_FALSE(testing::HasWeight(*m, "encoder.layer_norm.weight"));
  EXPECT_TRUE(testing::HasWeight(*m, "encoder.layers.0.conv_module.depthwise_layer_norm.weight"));
  testing::ExpectConfigError("Wav2Vec2BertForSequenceClassification", "num_labels", 1,
                             "num_labels");
  testing::ExpectConfigError("Wav2Vec2BertModel", "position_embeddings_type", "alibi",
                             "position_embeddings_type");
}

// The heads under `wav2vec2_bert.` read the encoder's hidden states (the weighted layer sum) and
// its last state, as Wav2Vec2's.
TEST(AudioBertTest, HeadsAsTransformers) {
  ASSERT_NO_FATAL_FAILURE(testing::ExpectWeightedSumAndCtcHeads(
      "Wav2Vec2Bert", "wav2vec2_bert.", "input_features",
      [](const WeightMap& w, const std::string& p, const json& c, const at::Tensor& x,
         std::vector<at::Tensor>* states) { return RefBert(w, p, c, x, states)[0]; }));
  for (const char* arch : {"Wav2Vec2BertForAudioFrameClassification", "Wav2Vec2BertForXVector"}) {
    EXPECT_TRUE(testing::Build(arch)) << arch;
  }
}

// Wav2Vec2BertModel.forward after the encoder with use_intermediate_ffn_before_adapter and the
// adapter (Wav2Vec2BertAdapter, Wav2Vec2BertAdapterLayer) as written there.
at::Tensor RefAdapter(const WeightMap& w, const std::string& p, const json& c, at::Tensor hs) {
  const double eps = c.value("layer_norm_eps", 1e-5);
  auto ffn = [&](const std::string& f, const at::Tensor& y) {
    return LinWithBias(w, f + ".output_dense",
                       at::relu(LinWithBias(w, f + ".intermediate_dense", y)));
  };
  hs = hs + 0.5 * ffn(p + "intermediate_ffn", hs);
  hs = Ln(w, p + "adapter.proj_layer_norm", LinWithBias(w, p + "adapter.proj", hs), eps);
  const int64_t stride = c.value("adapter_stride", int64_t{2});
  const int64_t heads = c.at("num_attention_heads").get<int64_t>();
  auto conv_glu = [&](const std::string& n, const at::Tensor& y) {
    return at::glu(at::conv1d(y.transpose(1, 2), w.at(n + ".weight"), w.at(n + ".bias"),
                              at::IntArrayRef{stride}, at::IntArrayRef{stride / 2}),
                   1)
        .transpose(1, 2);
  };
  const std::string lp = p + "adapter.layers.0.";
  at::Tensor residual = conv_glu(lp + "residual_conv", Ln(w, lp + "residual_layer_norm", hs, eps));
  at::Tensor x = conv_glu(lp + "self_attn_conv", Ln(w, lp + "self_attn_layer_norm", hs, eps));
  const int64_t b = x.size(0), t = x.size(1), o = x.size(2), hd = o / heads;
  auto split = [&](const at::Tensor& y) { return y.view({b, t, heads, hd}).transpose(1, 2); };
  at::Tensor q = split(LinWithBias(w, lp + "self_attn.linear_q", x));
  at::Tensor k = split(LinWithBias(w, lp + "self_attn.linear_k", x));
  at::Tensor v = split(LinWithBias(w, lp + "self_attn.linear_v", x));
  at::Tensor probs = at::softmax(at::matmul(q, k.transpose(-2, -1)) / std::sqrt(1.0 * hd), -1);
  x = LinWithBias(w, lp + "self_attn.linear_out",
                  at::matmul(probs, v).transpose(1, 2).reshape({b, t, o}));
  x = x + residual;
  return ffn(lp + "ffn", Ln(w, lp + "ffn_layer_norm", x, eps)) + x;
}

// The adapter (and the intermediate FFN before it) on the Model and under ForCTC's lm_head; the
// classifiers refuse it as transformers' do.
TEST(AudioBertTest, AdapterAsTransformers) {
  json c = *ExampleConfig("Wav2Vec2BertForCTC");
  c["add_adapter"] = true;
  c["use_intermediate_ffn_before_adapter"] = true;
  c["output_hidden_size"] = 512;
  c["num_adapter_layers"] = 1;
  auto ctc = testing::Build("Wav2Vec2BertForCTC", c);
  ASSERT_TRUE(ctc);
  const json& t = ctc->spec().tiny_config;
  const int64_t o = t.at("output_hidden_size").get<int64_t>();
  EXPECT_LT(o, t.at("hidden_size").get<int64_t>());
  EXPECT_EQ(testing::WeightShape(*ctc, "lm_head.weight")[1], o);
  const WeightMap w = ctc->InitWeights(5, at::kDouble);
  Batch b = ctc->MakeBatch(3, 2);
  b.inputs["input_features"] = b.inputs.at("input_features").to(at::kDouble);
  at::Tensor hs = RefBert(w, "wav2vec2_bert.", t, b.inputs.at("input_features"), nullptr)[0];
  hs = RefAdapter(w, "wav2vec2_bert.", t, hs);
  EXPECT_EQ(hs.size(1), 8);  // 16 frames at stride 2
  const at::Tensor got = ctc->Forward(w, b.inputs)[0];
  EXPECT_EQ(got.size(1), 8);
  EXPECT_LT(testing::RelDiff(got, LinWithBias(w, "lm_head", hs)), 1e-10);
  EXPECT_TRUE(std::isfinite(ctc->Loss(w, b).item<double>()));
  c["architectures"] = {"Wav2Vec2BertModel"};
  auto base = testing::Build("Wav2Vec2BertModel", c);
  ASSERT_TRUE(base);
  Batch bb = base->MakeBatch(1, 2);
  EXPECT_EQ(bb.labels.at("target").sizes(), (at::IntArrayRef{2, 8, o}));
  testing::ExpectConfigError("Wav2Vec2BertForSequenceClassification", "add_adapter", true,
                             "add_adapter");
  testing::ExpectConfigError("Wav2Vec2BertModel", "use_intermediate_ffn_before_adapter", true,
                             "use_intermediate_ffn_before_adapter");
}

}  // namespace
}  // namespace ts::zoo
