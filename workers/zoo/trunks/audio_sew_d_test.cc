// SEW-D (families/sew_d.cc, trunks/audio_sew_d.cc) against a reference written here from
// modular_sew_d.py, in double from at:: ops as transformers dispatches them (at::conv1d,
// at::avg_pool1d, torch.bmm over [B x heads, T, d], torch.gather, the float32 scale), never from
// the zoo's own trunk.
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

// make_log_bucket_position / build_relative_position as written there.
at::Tensor RelativePositions(int64_t t, int64_t bucket_size, int64_t max_position) {
  at::Tensor rel = at::arange(t, at::kLong).unsqueeze(1) - at::arange(t, at::kLong).unsqueeze(0);
  const int64_t mid = bucket_size / 2;
  at::Tensor sign = at::sign(rel);
  at::Tensor abs_pos = at::where(at::logical_and(rel.lt(mid), rel.gt(-mid)),
                                 at::tensor(mid - 1).to(rel.scalar_type()), at::abs(rel));
  at::Tensor log_pos =
      at::ceil(at::log(abs_pos / mid) /
               at::log(at::tensor(static_cast<double>(max_position - 1) / mid).to(at::kFloat)) *
               (mid - 1)) +
      mid;
  at::Tensor bucket = at::where(abs_pos.le(mid), rel.to(log_pos.scalar_type()), log_pos * sign);
  return bucket.to(at::kLong);
}

// DisentangledSelfAttention.forward (share_att_key, c2p and p2c) on x [B, T, H].
at::Tensor Attention(const WeightMap& w, const std::string& p, const at::Tensor& x,
                     const at::Tensor& rel_emb, const at::Tensor& rel_pos, int64_t heads,
                     int64_t span) {
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2);
  auto scores_shape = [&](const at::Tensor& y) {  // transpose_for_scores
    return y.view({y.size(0), y.size(1), heads, -1})
        .permute({0, 2, 1, 3})
        .reshape({-1, y.size(1), h / heads});
  };
  at::Tensor q = scores_shape(LinWithBias(w, p + "query_proj", x));
  at::Tensor k = scores_shape(LinWithBias(w, p + "key_proj", x));
  at::Tensor v = scores_shape(LinWithBias(w, p + "value_proj", x));
  at::Tensor scale = at::sqrt(at::tensor(static_cast<float>(h / heads)) * 3).to(at::kDouble);
  at::Tensor scores = at::bmm(q, k.transpose(-1, -2) / scale);
  at::Tensor re = rel_emb.slice(0, 0, span * 2).unsqueeze(0);
  at::Tensor pq = scores_shape(LinWithBias(w, p + "query_proj", re)).repeat({b, 1, 1});
  at::Tensor pk = scores_shape(LinWithBias(w, p + "key_proj", re)).repeat({b, 1, 1});
  at::Tensor c2p = at::bmm(q, pk.transpose(-1, -2));
  at::Tensor c2p_pos = at::clamp(rel_pos + span, 0, span * 2 - 1);
  c2p = at::gather(c2p, -1, c2p_pos.expand({q.size(0), t, t}));
  at::Tensor p2c_pos = at::clamp(-rel_pos + span, 0, span * 2 - 1);
  at::Tensor p2c = at::bmm(k, pq.transpose(-1, -2));
  p2c = at::gather(p2c, -1, p2c_pos.expand({q.size(0), t, t})).transpose(-1, -2);
  scores = scores + c2p / scale + p2c / scale;
  at::Tensor probs = at::softmax(scores.view({-1, heads, t, t}), -1);
  at::Tensor ctx = at::bmm(probs.view({-1, t, t}), v);
  return ctx.view({-1, heads, t, h / heads}).permute({0, 2, 1, 3}).reshape({b, t, h});
}

// SEWDModel.forward without a mask; `states` gets SEWDTransformerEncoder's hidden states.
at::Tensor RefSewD(const WeightMap& w, const std::string& p, const json& c,
                   const at::Tensor& values, std::vector<at::Tensor>* states = nullptr) {
  at::Tensor hs = Ln(w, p + "layer_norm", FeatureEncoder(w, p, c, true, values).transpose(1, 2),
                     c.at("feature_layer_norm_eps"));
  hs = LinWithBias(w, p + "feature_projection", hs);
  const int64_t frames = hs.size(1), sq = c.at("squeeze_factor").get<int64_t>();
  hs = SewSqueeze(w, p, c, hs);
  const int64_t len = hs.size(1);
  const double eps = c.at("layer_norm_eps").get<double>();
  const std::string e = p + "encoder.encoder.";
  at::Tensor rel = Ln(w, e + "LayerNorm", w.at(e + "rel_embeddings.weight"), eps);
  const int64_t buckets = c.at("position_buckets").get<int64_t>();
  at::Tensor rel_pos = RelativePositions(len, buckets, c.at("max_position_embeddings"));
  const int64_t heads = c.at("num_attention_heads").get<int64_t>();
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    if (states) states->push_back(hs);
    const std::string lp = e + "layer." + std::to_string(i) + ".";
    at::Tensor a = Attention(w, lp + "attention.self.", hs, rel, rel_pos, heads, buckets);
    a = Ln(w, lp + "attention.output.LayerNorm",
           LinWithBias(w, lp + "attention.output.dense", a) + hs, eps);
    at::Tensor inter = at::gelu(LinWithBias(w, lp + "intermediate.dense", a));
    hs = Ln(w, lp + "output.LayerNorm", LinWithBias(w, lp + "output.dense", inter) + a, eps);
  }
  if (states) states->push_back(hs);
  hs = at::gelu(LinWithBias(w, p + "encoder.upsample.projection", hs));
  const int64_t b = hs.size(0), src = hs.size(1), dim = hs.size(2) / sq;
  hs = hs.reshape({b, src, sq, dim}).reshape({b, src * sq, dim});
  if (hs.size(1) < frames) hs = at::constant_pad_nd(hs, {0, 0, 0, frames - hs.size(1)});
  return hs;
}

// The DeBERTa-v2 layers between SEW's squeeze and upsampling: disentangled attention over the
// log-bucketed relative positions (4 buckets over 8 pooled frames), the shared normed table.
TEST(AudioSewDTest, DisentangledEncoderBetweenSqueezeAndUpsamplingAsTransformers) {
  auto m = testing::Build("SEWDModel");
  ASSERT_TRUE(m);
  const json& c = m->spec().tiny_config;
  EXPECT_EQ(c.at("position_buckets").get<int64_t>(), 4);
  const WeightMap w = m->InitWeights(7, at::kDouble);
  Batch b = m->MakeBatch(2, 2);
  b.inputs["input_values"] = b.inputs.at("input_values").to(at::kDouble);
  const std::vector<at::Tensor> out = m->Forward(w, b.inputs);
  ASSERT_EQ(out.size(), 1u);
  const at::Tensor want = RefSewD(w, "", c, b.inputs.at("input_values"));
  EXPECT_EQ(out[0].sizes(), want.sizes());
  EXPECT_LT(testing::RelDiff(out[0], want), 1e-10);
  EXPECT_EQ(StateDictShapes(*m).back().name, "masked_spec_embed");
  EXPECT_TRUE(testing::HasWeight(*m, "encoder.encoder.rel_embeddings.weight"));
  EXPECT_FALSE(testing::HasWeight(*m, "encoder.layer_norm.weight"));
  testing::ExpectConfigError("SEWDModel", "conv_kernel_size", 3, "conv_kernel_size");
  testing::ExpectConfigError("SEWDModel", "pos_att_type", "p2c|c2p", "pos_att_type");
}

// SEWDForSequenceClassification's weighted layer sum over the pooled-rate hidden states; CTC.
TEST(AudioSewDTest, HeadsAsTransformers) {
  ASSERT_NO_FATAL_FAILURE(
      testing::ExpectWeightedSumAndCtcHeads("SEWD", "sew_d.", "input_values", RefSewD));
}

}  // namespace
}  // namespace ts::zoo
