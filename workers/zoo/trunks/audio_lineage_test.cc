// The wav2vec2 lineage's newer families and heads (data2vec-audio, wavlm, the x-vector head)
// against references written here from the transformers sources each test names: the whole
// encoder in double from at:: ops (modeling_wav2vec2.py, modular_data2vec_audio.py,
// modular_wavlm.py), never from the zoo's own trunk.
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
using testing::FeatureEncoder;
using testing::LinWithBias;
using testing::Ln;

std::vector<int64_t> Ints(const json& c, const char* field) {
  return c.at(field).get<std::vector<int64_t>>();
}

// Which of the lineage's variants the reference computes.
struct Variant {
  bool stacked_pos_conv = false;  // Data2VecAudioPositionalConvEmbedding
  bool wavlm = false;             // WavLMAttention
};

// WavLMAttention.compute_bias / _relative_positions_bucket, as written there (log on every
// offset, the exact branch chosen by torch.where).
at::Tensor WavLmBias(const WeightMap& w, const std::string& p, int64_t t, int64_t buckets,
                     int64_t max_distance) {
  at::Tensor ctx = at::arange(t, at::kLong).unsqueeze(1);
  at::Tensor mem = at::arange(t, at::kLong).unsqueeze(0);
  at::Tensor rel = mem - ctx;
  const int64_t nb = buckets / 2;
  at::Tensor out = rel.gt(0).to(at::kLong) * nb;
  at::Tensor dist = rel.abs();
  const int64_t max_exact = nb / 2;
  at::Tensor large = at::log(dist.to(at::kFloat) / max_exact);
  large = large / std::log(static_cast<double>(max_distance) / max_exact);
  large = large * (nb - max_exact);
  at::Tensor large_l = (large + max_exact).to(at::kLong);
  large_l = at::min(large_l, at::full_like(large_l, nb - 1));
  out = out + at::where(dist.lt(max_exact), dist, large_l);
  return at::embedding(w.at(p + "encoder.layers.0.attention.rel_attn_embed.weight"), out)
      .permute({2, 0, 1});
}

// WavLMAttention.forward: the gate from the attention input, F.multi_head_attention_forward with
// the gated bias as attn_mask.
at::Tensor WavLmAttention(const WeightMap& w, const std::string& p, const at::Tensor& x,
                          const at::Tensor& bias, int64_t heads) {
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2), hd = h / heads;
  at::Tensor g = x.view({b, t, heads, hd}).permute({0, 2, 1, 3});
  at::Tensor rp = LinWithBias(w, p + "gru_rel_pos_linear", g).view({b, heads, t, 2, 4}).sum(-1);
  auto ab = at::sigmoid(rp).chunk(2, -1);
  at::Tensor gate = ab[0] * (ab[1] * w.at(p + "gru_rel_pos_const") - 1.0) + 2.0;
  at::Tensor gated = gate.view({b * heads, -1, 1}) * bias.repeat({b, 1, 1});
  auto split = [&](const at::Tensor& y) {
    return y.view({b, t, heads, hd}).transpose(1, 2).reshape({b * heads, t, hd});
  };
  at::Tensor q =
      split(LinWithBias(w, p + "q_proj", x)) * (1.0 / std::sqrt(static_cast<double>(hd)));
  at::Tensor k = split(LinWithBias(w, p + "k_proj", x));
  at::Tensor v = split(LinWithBias(w, p + "v_proj", x));
  at::Tensor probs = at::softmax(at::bmm(q, k.transpose(1, 2)) + gated, -1);
  at::Tensor ctx = at::bmm(probs, v).view({b, heads, t, hd}).transpose(1, 2).reshape({b, t, h});
  return LinWithBias(w, p + "out_proj", ctx);
}

// Wav2Vec2Attention (eager): softmax(q k^T / sqrt(d)) v, out_proj.
at::Tensor PlainAttention(const WeightMap& w, const std::string& p, const at::Tensor& x,
                          int64_t heads) {
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2), hd = h / heads;
  auto split = [&](const at::Tensor& y) { return y.view({b, t, heads, hd}).transpose(1, 2); };
  at::Tensor q = split(LinWithBias(w, p + "q_proj", x)), k = split(LinWithBias(w, p + "k_proj", x));
  at::Tensor v = split(LinWithBias(w, p + "v_proj", x));
  at::Tensor probs =
      at::softmax(at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(hd)), -1);
  return LinWithBias(w, p + "out_proj", at::matmul(probs, v).transpose(1, 2).reshape({b, t, h}));
}

// The base model's last_hidden_state for `c` (a tiny config of the lineage) on weights under
// `p`: Wav2Vec2FeatureEncoder (or Data2VecAudioConvLayer), Wav2Vec2FeatureProjection, the
// positional conv(s), Wav2Vec2Encoder's post-LN layers (the examples are not stable-layer-norm).
at::Tensor RefEncoder(const WeightMap& w, const std::string& p, const json& c, const Variant& v,
                      const at::Tensor& values) {
  const bool group = !v.stacked_pos_conv && c.value("feat_extract_norm", "group") == "group";
  const at::Tensor x = FeatureEncoder(w, p, c, group, values);
  const double eps = c.value("layer_norm_eps", 1e-5);
  at::Tensor hs = LinWithBias(w, p + "feature_projection.projection",
                              Ln(w, p + "feature_projection.layer_norm", x.transpose(1, 2), eps));
  const int64_t groups = c.at("num_conv_pos_embedding_groups").get<int64_t>();
  at::Tensor pos = hs.transpose(1, 2);
  if (v.stacked_pos_conv) {
    const int64_t k = c.at("conv_pos_kernel_size").get<int64_t>();
    for (int64_t i = 0; i < c.at("num_conv_pos_embeddings").get<int64_t>(); ++i) {
      const std::string cp = p + "encoder.pos_conv_embed.layers." + std::to_string(i) + ".conv.";
      pos = at::conv1d(pos, w.at(cp + "weight"), w.at(cp + "bias"), 1, k / 2, 1, groups);
      if (k % 2 == 0) pos = pos.narrow(2, 0, pos.size(2) - 1);
      pos = at::gelu(at::layer_norm(pos.transpose(1, 2), {pos.size(1)}).transpose(1, 2));
    }
  } else {
    const int64_t k = c.at("num_conv_pos_embeddings").get<int64_t>();
    const std::string cp = p + "encoder.pos_conv_embed.conv.";
    const at::Tensor& g = w.at(cp + "parametrizations.weight.original0");
    const at::Tensor& vv = w.at(cp + "parametrizations.weight.original1");
    at::Tensor weight = g * vv / vv.norm(2, at::IntArrayRef{0, 1}, /*keepdim=*/true);
    pos = at::conv1d(pos, weight, w.at(cp + "bias"), 1, k / 2, 1, groups);
    if (k % 2 == 0) pos = pos.narrow(2, 0, pos.size(2) - 1);
    pos = at::gelu(pos);
  }
  hs = Ln(w, p + "encoder.layer_norm", hs + pos.transpose(1, 2), eps);
  const int64_t heads = c.at("num_attention_heads").get<int64_t>();
  at::Tensor bias;
  if (v.wavlm) {
    bias = WavLmBias(w, p, hs.size(1), c.value("num_buckets", int64_t{320}),
                     c.value("max_bucket_distance", int64_t{800}));
  }
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    const std::string lp = p + "encoder.layers." + std::to_string(i) + ".";
    at::Tensor a = v.wavlm ? WavLmAttention(w, lp + "attention.", hs, bias, heads)
                           : PlainAttention(w, lp + "attention.", hs, heads);
    hs = Ln(w, lp + "layer_norm", hs + a, eps);
    at::Tensor ff =
        LinWithBias(w, lp + "feed_forward.output_dense",
                    at::gelu(LinWithBias(w, lp + "feed_forward.intermediate_dense", hs)));
    hs = Ln(w, lp + "final_layer_norm", hs + ff, eps);
  }
  return hs;
}

// The model's last_hidden_state against the reference, in double.
void ExpectEncoderMatches(const std::string& arch, const Variant& v) {
  SCOPED_TRACE(arch);
  auto m = testing::Build(arch);
  ASSERT_TRUE(m);
  const WeightMap w = m->InitWeights(7, at::kDouble);
  Batch b = m->MakeBatch(2, 2);
  b.inputs["input_values"] = b.inputs.at("input_values").to(at::kDouble);
  const at::Tensor got = m->Forward(w, b.inputs)[0];
  const at::Tensor want = RefEncoder(w, "", m->spec().tiny_config, v, b.inputs.at("input_values"));
  EXPECT_LT(testing::RelDiff(got, want), 1e-10);
}

// modular_data2vec_audio.py: every conv layer-normed, num_conv_pos_embeddings stacked positional
// convs of conv_pos_kernel_size with a parameter-free LayerNorm, under `data2vec_audio.`.
TEST(AudioLineageTest, Data2VecAudioStackedPositionalConvsAsTransformers) {
  ExpectEncoderMatches("Data2VecAudioModel", {.stacked_pos_conv = true});
  auto m = testing::Build("Data2VecAudioForCTC");
  ASSERT_TRUE(m);
  EXPECT_TRUE(testing::HasWeight(*m, "data2vec_audio.encoder.pos_conv_embed.layers.1.conv.weight"));
  EXPECT_TRUE(
      testing::HasWeight(*m, "data2vec_audio.feature_extractor.conv_layers.3.layer_norm.weight"));
  EXPECT_FALSE(testing::HasWeight(*m, "data2vec_audio.encoder.pos_conv_embed.conv.bias"));
  // The even kernel drops the padded conv's last frame, as Data2VecAudioPadLayer does.
  json c = m->spec().tiny_config;
  c["architectures"] = {"Data2VecAudioModel"};
  c["conv_pos_kernel_size"] = 4;
  auto even = testing::BuildFull(c);
  ASSERT_TRUE(even);
  const WeightMap w = even->InitWeights(3, at::kDouble);
  Batch b = even->MakeBatch(2, 2);
  b.inputs["input_values"] = b.inputs.at("input_values").to(at::kDouble);
  EXPECT_LT(testing::RelDiff(
                even->Forward(w, b.inputs)[0],
                RefEncoder(w, "", c, {.stacked_pos_conv = true}, b.inputs.at("input_values"))),
            1e-10);
}

// modular_wavlm.py: layer 0's rel_attn_embed at the bucketed relative positions, gated per layer
// and head from the layer input, added to the attention scores of every layer.
TEST(AudioLineageTest, WavLmGatedRelativePositionBiasAsTransformers) {
  ExpectEncoderMatches("WavLMModel", {.wavlm = true});
  auto m = testing::Build("WavLMForSequenceClassification");
  ASSERT_TRUE(m);
  EXPECT_TRUE(testing::HasWeight(*m, "wavlm.encoder.layers.0.attention.rel_attn_embed.weight"));
  const json& t = m->spec().tiny_config;
  const int64_t head_dim =
      t["hidden_size"].get<int64_t>() / t["num_attention_heads"].get<int64_t>();
  EXPECT_EQ(testing::WeightShape(*m, "wavlm.encoder.layers.0.attention.gru_rel_pos_linear.weight"),
            (std::vector<int64_t>{8, head_dim}));
  // Buckets beyond the exact range (num_buckets 8: exact offsets 0 and 1 only) still match.
  json c = *ExampleConfig("WavLMModel");
  c["num_buckets"] = 8;
  c["max_bucket_distance"] = 12;
  auto small = testing::Build("WavLMModel", c);
  ASSERT_TRUE(small);
  const WeightMap w = small->InitWeights(4, at::kDouble);
  Batch b = small->MakeBatch(1, 2);
  b.inputs["input_values"] = b.inputs.at("input_values").to(at::kDouble);
  EXPECT_LT(testing::RelDiff(small->Forward(w, b.inputs)[0],
                             RefEncoder(w, "", small->spec().tiny_config, {.wavlm = true},
                                        b.inputs.at("input_values"))),
            1e-10);
  testing::ExpectConfigError("WavLMModel", "num_buckets", 2, "num_buckets");
  EXPECT_EQ(StateDictShapes(*m).back().name, "wavlm.masked_spec_embed");
}

// modeling_wav2vec2.py Wav2Vec2ForXVector: projector, TDNNLayer (the kernel Linear viewed
// [out, k, in] and transposed into a dilated conv1d, ReLU), mean and std over frames,
// feature_extractor, classifier; AMSoftmaxLoss over the logits.
TEST(AudioLineageTest, XVectorIsTdnnStatisticPoolingAndAmSoftmaxAsTransformers) {
  for (const char* arch : {"Wav2Vec2ForXVector", "UniSpeechSatForXVector",
                           "Data2VecAudioForXVector", "WavLMForXVector"}) {
    SCOPED_TRACE(arch);
    auto m = testing::Build(arch);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->spec().task, "audio-xvector");
    const json& c = m->spec().tiny_config;
    const std::string family = m->spec().family;
    const std::string base_arch =
        std::string(arch).substr(0, std::string(arch).find("For")) + "Model";
    auto base = testing::BuildSibling(*m, base_arch);
    ASSERT_TRUE(base);
    const std::string prefix = family == "wav2vec2"        ? "wav2vec2."
                               : family == "unispeech-sat" ? "unispeech_sat."
                               : family == "wavlm"         ? "wavlm."
                                                           : "data2vec_audio.";
    const WeightMap w = m->InitWeights(5, at::kDouble);
    Batch b = m->MakeBatch(3, 2);
    b.inputs["input_values"] = b.inputs.at("input_values").to(at::kDouble);
    const at::Tensor h = base->Forward(testing::Unprefixed(w, prefix), b.inputs)[0];
    at::Tensor x = LinWithBias(w, "projector", h);
    const auto dims = Ints(c, "tdnn_dim"), kernels = Ints(c, "tdnn_kernel"),
               dil = Ints(c, "tdnn_dilation");
    for (size_t i = 0; i < dims.size(); ++i) {
      const std::string p = "tdnn." + std::to_string(i) + ".kernel";
      const int64_t in = x.size(-1);
      at::Tensor weight = w.at(p + ".weight").view({dims[i], kernels[i], in}).transpose(1, 2);
      x = at::relu(at::conv1d(x.transpose(1, 2), weight, w.at(p + ".bias"), at::IntArrayRef{1},
                              at::IntArrayRef{0}, at::IntArrayRef{dil[i]})
                       .transpose(1, 2));
    }
    at::Tensor stats = at::cat({x.mean(1), x.std(1)}, -1);
    at::Tensor emb = LinWithBias(w, "feature_extractor", stats);
    at::Tensor logits = LinWithBias(w, "classifier", emb);
    const auto out = m->Forward(w, b.inputs);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_LT(testing::RelDiff(out[0], logits), 1e-10);
    EXPECT_LT(testing::RelDiff(out[1], emb), 1e-10);
    // AMSoftmaxLoss(scale 30, margin 0.4).
    const at::Tensor labels = b.labels.at("labels").flatten();
    at::Tensor wn =
        w.at("objective.weight") / w.at("objective.weight").norm(2, at::IntArrayRef{0}, true);
    at::Tensor hn = logits / logits.norm(2, at::IntArrayRef{1}, true);
    at::Tensor cos = at::mm(hn, wn);
    at::Tensor onehot = at::one_hot(labels, wn.size(1)).to(at::kBool);
    at::Tensor want = at::cross_entropy_loss(30.0 * at::where(onehot, cos - 0.4, cos), labels);
    EXPECT_NEAR(m->Loss(w, b).item<double>(), want.item<double>(), 1e-9);
  }
  testing::ExpectConfigError("Wav2Vec2ForXVector", "tdnn_kernel", json{9, 3, 3, 1, 1},
                             "tdnn_kernel");
  testing::ExpectConfigError("Wav2Vec2ForXVector", "tdnn_dilation", json{1, 2}, "tdnn_dilation");
}

}  // namespace
}  // namespace ts::zoo
