// SEW (families/sew.cc) against a reference written here from modular_sew.py and the
// Wav2Vec2 modules it reuses (modeling_wav2vec2.py), in double from at:: ops (at::conv1d,
// at::group_norm, at::avg_pool1d), never from the zoo's own trunk.
#include <gtest/gtest.h>

#include <algorithm>
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
using testing::FeatureEncoder;
using testing::LinWithBias;
using testing::Ln;
using testing::SewSqueeze;
using testing::WeightedLayerSumLogits;

// Wav2Vec2Attention (eager) and Wav2Vec2EncoderLayer (post-LN).
at::Tensor EncoderLayer(const WeightMap& w, const std::string& lp, const at::Tensor& x,
                        int64_t heads, double eps) {
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2), hd = h / heads;
  auto split = [&](const at::Tensor& y) { return y.view({b, t, heads, hd}).transpose(1, 2); };
  const std::string a = lp + "attention.";
  at::Tensor q = split(LinWithBias(w, a + "q_proj", x)), k = split(LinWithBias(w, a + "k_proj", x));
  at::Tensor v = split(LinWithBias(w, a + "v_proj", x));
  at::Tensor probs =
      at::softmax(at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(hd)), -1);
  at::Tensor attn =
      LinWithBias(w, a + "out_proj", at::matmul(probs, v).transpose(1, 2).reshape({b, t, h}));
  at::Tensor hs = Ln(w, lp + "layer_norm", x + attn, eps);
  at::Tensor ff = LinWithBias(w, lp + "feed_forward.output_dense",
                              at::gelu(LinWithBias(w, lp + "feed_forward.intermediate_dense", hs)));
  return Ln(w, lp + "final_layer_norm", hs + ff, eps);
}

// SEWModel.forward without a mask; `states` receives SEWEncoder's hidden states.
at::Tensor RefSew(const WeightMap& w, const std::string& p, const json& c, const at::Tensor& values,
                  std::vector<at::Tensor>* states = nullptr) {
  const auto dims = c.at("conv_dim").get<std::vector<int64_t>>();
  const double eps = c.value("layer_norm_eps", 1e-5);
  at::Tensor hs =
      Ln(w, p + "layer_norm", FeatureEncoder(w, p, c, true, values).transpose(1, 2), eps);
  if (dims.back() != c.at("hidden_size").get<int64_t>())
    hs = LinWithBias(w, p + "feature_projection", hs);
  const int64_t frames = hs.size(1), sq = c.at("squeeze_factor").get<int64_t>();
  hs = SewSqueeze(w, p, c, hs);
  hs = Ln(w, p + "encoder.layer_norm", hs, eps);
  const int64_t heads = c.at("num_attention_heads").get<int64_t>();
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    if (states) states->push_back(hs);
    hs = EncoderLayer(w, p + "encoder.layers." + std::to_string(i) + ".", hs, heads, eps);
  }
  if (states) states->push_back(hs);
  // SEWUpsampling.
  hs = at::gelu(LinWithBias(w, p + "encoder.upsample.projection", hs));
  const int64_t b = hs.size(0), src = hs.size(1), dim = hs.size(2) / sq;
  hs = hs.reshape({b, src, sq, dim}).reshape({b, src * sq, dim});
  if (hs.size(1) < frames) hs = at::constant_pad_nd(hs, {0, 0, 0, frames - hs.size(1)});
  return hs;
}

at::Tensor DoubleValues(Batch& b) {
  b.inputs["input_values"] = b.inputs.at("input_values").to(at::kDouble);
  return b.inputs.at("input_values");
}

void ExpectModelMatches(const std::unique_ptr<Model>& m) {
  ASSERT_TRUE(m);
  const WeightMap w = m->InitWeights(7, at::kDouble);
  Batch b = m->MakeBatch(2, 2);
  const at::Tensor values = DoubleValues(b);
  const std::vector<at::Tensor> out = m->Forward(w, b.inputs);
  ASSERT_EQ(out.size(), 1u);  // SEWModel: BaseModelOutput, no extract_features
  const at::Tensor want = RefSew(w, "", m->spec().tiny_config, values);
  EXPECT_EQ(out[0].sizes(), want.sizes());
  EXPECT_LT(testing::RelDiff(out[0], want), 1e-10);
}

// The squeeze (strided positional conv beside the average pool), the layers at the pooled rate,
// the upsampling back to the feature encoder's frames.
TEST(AudioSewTest, SqueezedEncoderAndUpsamplingAsTransformers) {
  auto m = testing::Build("SEWModel");
  ExpectModelMatches(m);
  EXPECT_TRUE(testing::HasWeight(*m, "feature_projection.weight"));
  EXPECT_TRUE(testing::HasWeight(*m, "layer_norm.weight"));
  const int64_t h = m->spec().tiny_config.at("hidden_size").get<int64_t>();
  EXPECT_EQ(testing::WeightShape(*m, "encoder.upsample.projection.weight"),
            (std::vector<int64_t>{2 * h, h}));
  EXPECT_EQ(StateDictShapes(*m).back().name, "masked_spec_embed");
  // An odd positional kernel, squeeze 3 (the upsampled frames padded back to the input's), and
  // conv_dim[-1] == hidden_size: no feature_projection.
  json c = *ExampleConfig("SEWModel");
  c["num_conv_pos_embeddings"] = 31;
  c["squeeze_factor"] = 3;
  c["hidden_size"] = 528;
  c["num_attention_heads"] = 3;
  c["conv_dim"] = {64, 128, 128, 128, 128, 256, 256, 256, 256, 528, 528, 528, 528};
  auto odd = testing::Build("SEWModel", c);
  ExpectModelMatches(odd);
  EXPECT_FALSE(testing::HasWeight(*odd, "feature_projection.weight"));
  EXPECT_EQ(odd->spec().tiny_config.at("num_conv_pos_embeddings").get<int64_t>(), 7);
  testing::ExpectConfigError("SEWModel", "squeeze_factor", 0, "squeeze_factor");
  testing::ExpectConfigError("SEWModel", "squeeze_factor", 5, "squeeze_factor");
}

// SEWForCTC / SEWForSequenceClassification: Wav2Vec2's heads under `sew.`; the weighted layer
// sum reads SEWEncoder's hidden states, which are at the pooled rate.
TEST(AudioSewTest, HeadsReadTheSqueezedHiddenStatesAsTransformers) {
  auto ctc = testing::Build("SEWForCTC");
  ASSERT_TRUE(ctc);
  EXPECT_TRUE(testing::HasWeight(*ctc, "sew.encoder.upsample.projection.weight"));
  EXPECT_TRUE(testing::HasWeight(*ctc, "lm_head.weight"));
  EXPECT_EQ(StateDictShapes(*ctc).back().name, "sew.masked_spec_embed");
  {
    const WeightMap w = ctc->InitWeights(5, at::kDouble);
    Batch b = ctc->MakeBatch(3, 2);
    const at::Tensor values = DoubleValues(b);
    const at::Tensor hs = RefSew(w, "sew.", ctc->spec().tiny_config, values);
    EXPECT_LT(testing::RelDiff(ctc->Forward(w, b.inputs)[0], LinWithBias(w, "lm_head", hs)), 1e-10);
  }
  json c = *ExampleConfig("SEWForSequenceClassification");
  c["use_weighted_layer_sum"] = true;
  auto m = testing::Build("SEWForSequenceClassification", c);
  ASSERT_TRUE(m);
  WeightMap w = m->InitWeights(6, at::kDouble);
  testing::DistinctLayerWeights(w);
  Batch b = m->MakeBatch(4, 2);
  const at::Tensor values = DoubleValues(b);
  std::vector<at::Tensor> states;
  RefSew(w, "sew.", m->spec().tiny_config, values, &states);
  ASSERT_EQ(states.size(), m->spec().tiny_config.at("num_hidden_layers").get<size_t>() + 1);
  EXPECT_EQ(states[0].size(1), 8);  // 16 frames squeezed by 2
  const at::Tensor want = WeightedLayerSumLogits(w, states);
  EXPECT_LT(testing::RelDiff(m->Forward(w, b.inputs)[0], want), 1e-10);
}

}  // namespace
}  // namespace ts::zoo
