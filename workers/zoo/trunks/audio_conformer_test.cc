// wav2vec2-conformer (families/wav2vec2_conformer.cc, trunks/audio_conformer.cc) against a
// reference written here from modular_wav2vec2_conformer.py and the Wav2Vec2 modules it reuses, in
// double from at:: ops (at::conv1d, at::glu, at::batch_norm; the relative table built at
// max_source_positions and sliced as Wav2Vec2ConformerRelPositionalEmbedding does), never from the
// zoo's own trunk.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;
using testing::Lin;
using testing::Ln;

at::Tensor Act(const json& c, const at::Tensor& x) {
  return c.value("hidden_act", "gelu") == "swish" ? at::silu(x) : at::gelu(x);
}

// Wav2Vec2ConformerRotaryPositionalEmbedding.forward: [2, T, 1, 1, hd].
at::Tensor RotaryEmbedding(int64_t t, int64_t dim, double base) {
  at::Tensor inv_freq = 1.0 / at::pow(base, at::arange(0, dim, 2, at::kLong).to(at::kFloat) / dim);
  at::Tensor freqs = at::einsum("i,j->ij", {at::arange(t).to(at::kFloat), inv_freq});
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  return at::stack({emb.cos().unsqueeze(1).unsqueeze(1), emb.sin().unsqueeze(1).unsqueeze(1)})
      .to(at::kDouble);
}

// Wav2Vec2ConformerRelPositionalEmbedding: extend_pe at max_len, the centre 2T - 1 rows.
at::Tensor RelativeEmbedding(int64_t t, int64_t d, int64_t max_len) {
  at::Tensor pe_pos = at::zeros({max_len, d}), pe_neg = at::zeros({max_len, d});
  at::Tensor position = at::arange(0, max_len, at::kLong).to(at::kFloat).unsqueeze(1);
  at::Tensor div =
      at::exp(at::arange(0, d, 2, at::kLong).to(at::kFloat) * -(std::log(10000.0) / d));
  using at::indexing::Slice;
  pe_pos.index_put_({Slice(), Slice(0, at::indexing::None, 2)}, at::sin(position * div));
  pe_pos.index_put_({Slice(), Slice(1, at::indexing::None, 2)}, at::cos(position * div));
  pe_neg.index_put_({Slice(), Slice(0, at::indexing::None, 2)}, at::sin(-1 * position * div));
  pe_neg.index_put_({Slice(), Slice(1, at::indexing::None, 2)}, at::cos(-1 * position * div));
  at::Tensor pe = at::cat({at::flip(pe_pos, {0}).unsqueeze(0), pe_neg.slice(0, 1).unsqueeze(0)}, 1);
  const int64_t start = pe.size(1) / 2 - t + 1, end = pe.size(1) / 2 + t;
  return pe.slice(1, start, end).to(at::kDouble);
}

// Wav2Vec2ConformerSelfAttention.forward.
at::Tensor Attention(const WeightMap& w, const std::string& p, const json& c, const at::Tensor& x,
                     const at::Tensor& pos) {
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2);
  const int64_t heads = c.at("num_attention_heads").get<int64_t>(), hd = h / heads;
  const json type = c.value("position_embeddings_type", json("relative"));
  at::Tensor qk = x;
  if (type == "rotary") {
    at::Tensor hs = x.view({b, t, heads, hd}).transpose(0, 1);
    at::Tensor cos = pos[0].slice(0, 0, t), sin = pos[1].slice(0, 0, t);
    at::Tensor rot = at::cat({-hs.slice(-1, hd / 2), hs.slice(-1, 0, hd / 2)}, -1);
    qk = (hs * cos + rot * sin).transpose(0, 1).reshape({b, t, h});
  }
  at::Tensor q = Lin(w, p + "linear_q", qk).view({b, t, heads, hd}).transpose(1, 2);
  at::Tensor k = Lin(w, p + "linear_k", qk).view({b, t, heads, hd}).transpose(1, 2);
  at::Tensor v = Lin(w, p + "linear_v", x).view({b, t, heads, hd}).transpose(1, 2);
  at::Tensor scores;
  if (type == "relative") {
    at::Tensor proj = at::linear(pos, w.at(p + "linear_pos.weight"));
    proj = proj.view({pos.size(0), -1, heads, hd}).transpose(1, 2).transpose(2, 3);
    at::Tensor qt = q.transpose(1, 2);
    at::Tensor qu = (qt + w.at(p + "pos_bias_u")).transpose(1, 2);
    at::Tensor qv = (qt + w.at(p + "pos_bias_v")).transpose(1, 2);
    at::Tensor ac = at::matmul(qu, k.transpose(-2, -1));
    at::Tensor bd = at::matmul(qv, proj);
    at::Tensor padded = at::cat({at::zeros({b, heads, t, 1}, bd.options()), bd}, -1);
    padded = padded.view({b, heads, bd.size(3) + 1, bd.size(2)});
    bd = padded.slice(2, 1).reshape(bd.sizes()).slice(3, 0, bd.size(-1) / 2 + 1);
    scores = (ac + bd) / std::sqrt(static_cast<double>(hd));
  } else {
    scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
  }
  at::Tensor ctx = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({b, t, h});
  return Lin(w, p + "linear_out", ctx);
}

// Wav2Vec2ConformerConvolutionModule.forward.
at::Tensor ConvModule(const WeightMap& w, const std::string& p, const json& c,
                      const at::Tensor& x) {
  const int64_t h = x.size(2), k = c.at("conv_depthwise_kernel_size").get<int64_t>();
  at::Tensor y = Ln(w, p + "layer_norm", x, 1e-5).transpose(1, 2);
  y = at::glu(at::conv1d(y, w.at(p + "pointwise_conv1.weight")), 1);
  y = at::conv1d(y, w.at(p + "depthwise_conv.weight"), {}, 1, (k - 1) / 2, 1, h);
  const std::string bn = p + "batch_norm.";
  y = at::batch_norm(y, w.at(bn + "weight"), w.at(bn + "bias"), w.at(bn + "running_mean"),
                     w.at(bn + "running_var"), false, 0.1, 1e-5, false);
  y = at::conv1d(Act(c, y), w.at(p + "pointwise_conv2.weight"));
  return y.transpose(1, 2);
}

at::Tensor Block(const WeightMap& w, const std::string& lp, const json& c, const at::Tensor& x,
                 const at::Tensor& pos) {
  auto ffn = [&](const std::string& p, const at::Tensor& y) {
    return Lin(w, p + ".output_dense", Act(c, Lin(w, p + ".intermediate_dense", y)));
  };
  at::Tensor hs = ffn(lp + "ffn1", Ln(w, lp + "ffn1_layer_norm", x, 1e-5)) * 0.5 + x;
  hs = Attention(w, lp + "self_attn.", c, Ln(w, lp + "self_attn_layer_norm", hs, 1e-5), pos) + hs;
  hs = hs + ConvModule(w, lp + "conv_module.", c, hs);
  hs = ffn(lp + "ffn2", Ln(w, lp + "ffn2_layer_norm", hs, 1e-5)) * 0.5 + hs;
  return Ln(w, lp + "final_layer_norm", hs, 1e-5);
}

// Wav2Vec2Model.forward over the conformer encoder: {last_hidden_state, extract_features}.
std::vector<at::Tensor> RefConformer(const WeightMap& w, const std::string& p, const json& c,
                                     const at::Tensor& values) {
  const auto dims = c.at("conv_dim").get<std::vector<int64_t>>();
  const auto strides = c.at("conv_stride").get<std::vector<int64_t>>();
  const bool group = c.value("feat_extract_norm", "group") == "group";
  at::Tensor x = values.unsqueeze(1);
  for (size_t i = 0; i < dims.size(); ++i) {
    const std::string lp = p + "feature_extractor.conv_layers." + std::to_string(i) + ".";
    auto bias = w.find(lp + "conv.bias");
    x = at::conv1d(x, w.at(lp + "conv.weight"), bias == w.end() ? at::Tensor() : bias->second,
                   strides[i]);
    if (group && i == 0) {
      x = at::group_norm(x, dims[0], w.at(lp + "layer_norm.weight"), w.at(lp + "layer_norm.bias"));
    } else if (!group) {
      x = Ln(w, lp + "layer_norm", x.transpose(1, 2), 1e-5).transpose(1, 2);
    }
    x = at::gelu(x);
  }
  const double eps = c.value("layer_norm_eps", 1e-5);
  at::Tensor feats = Ln(w, p + "feature_projection.layer_norm", x.transpose(1, 2), eps);
  at::Tensor hs = Lin(w, p + "feature_projection.projection", feats);
  const int64_t h = hs.size(2), heads = c.at("num_attention_heads").get<int64_t>();
  const json type = c.value("position_embeddings_type", json("relative"));
  at::Tensor pos;
  if (type == "rotary") pos = RotaryEmbedding(hs.size(1), h / heads, 10000.0);
  if (type == "relative") pos = RelativeEmbedding(hs.size(1), h, 5000);
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    hs = Block(w, p + "encoder.layers." + std::to_string(i) + ".", c, hs, pos);
  }
  return {Ln(w, p + "encoder.layer_norm", hs, eps), feats};
}

void ExpectModelMatches(const json& config) {
  SCOPED_TRACE(config.dump());
  auto m = testing::Build("Wav2Vec2ConformerModel", config);
  ASSERT_TRUE(m);
  const WeightMap w = m->InitWeights(7, at::kDouble);
  Batch b = m->MakeBatch(2, 2);
  b.inputs["input_values"] = b.inputs.at("input_values").to(at::kDouble);
  const std::vector<at::Tensor> got = m->Forward(w, b.inputs);
  const std::vector<at::Tensor> want =
      RefConformer(w, "", m->spec().tiny_config, b.inputs.at("input_values"));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_LT(testing::RelDiff(got[0], want[0]), 1e-10);
  EXPECT_LT(testing::RelDiff(got[1], want[1]), 1e-10);
}

// Half-step FFNs, the GLU / depthwise / BatchNorm convolution module, the final LayerNorms; the
// three position_embeddings_type values.
TEST(AudioConformerTest, ConformerBlocksAsTransformers) {
  json c = *ExampleConfig("Wav2Vec2ConformerModel");
  EXPECT_EQ(c.at("position_embeddings_type"), "relative");
  ExpectModelMatches(c);
  c["position_embeddings_type"] = "rotary";
  c["hidden_act"] = "swish";
  ExpectModelMatches(c);
  c["position_embeddings_type"] = nullptr;
  c["feat_extract_norm"] = "group";
  ExpectModelMatches(c);
  testing::ExpectConfigError("Wav2Vec2ConformerModel", "conv_depthwise_kernel_size", 30,
                             "conv_depthwise_kernel_size");
  testing::ExpectConfigError("Wav2Vec2ConformerModel", "position_embeddings_type", "alibi",
                             "position_embeddings_type");
  testing::ExpectConfigError("Wav2Vec2ConformerModel", "add_adapter", true, "add_adapter");
}

// The heads under `wav2vec2_conformer.`; the unused positional conv and the rotary inv_freq as
// state_dict entries, not weights.
TEST(AudioConformerTest, HeadsAndStateDictAsTransformers) {
  auto ctc = testing::Build("Wav2Vec2ConformerForCTC");
  ASSERT_TRUE(ctc);
  const json& c = ctc->spec().tiny_config;
  ASSERT_EQ(c.at("position_embeddings_type"), "rotary");
  const WeightMap w = ctc->InitWeights(5, at::kDouble);
  Batch b = ctc->MakeBatch(3, 2);
  b.inputs["input_values"] = b.inputs.at("input_values").to(at::kDouble);
  const at::Tensor hs = RefConformer(w, "wav2vec2_conformer.", c, b.inputs.at("input_values"))[0];
  EXPECT_LT(testing::RelDiff(ctc->Forward(w, b.inputs)[0], Lin(w, "lm_head", hs)), 1e-10);
  const std::string pc = "wav2vec2_conformer.encoder.pos_conv_embed.conv.";
  EXPECT_FALSE(testing::HasWeight(*ctc, pc + "bias"));
  const TensorMap sd = StateDict(*ctc, ctc->InitWeights(5), 1);
  EXPECT_TRUE(sd.count(pc + "parametrizations.weight.original1"));
  EXPECT_TRUE(sd.count("wav2vec2_conformer.masked_spec_embed"));
  EXPECT_TRUE(
      sd.count("wav2vec2_conformer.encoder.layers.0.conv_module.batch_norm.num_batches_tracked"));
  const int64_t hd =
      c.at("hidden_size").get<int64_t>() / c.at("num_attention_heads").get<int64_t>();
  at::Tensor inv = 1.0 / at::pow(10000.0, at::arange(0, hd, 2, at::kLong).to(at::kFloat) / hd);
  ASSERT_TRUE(sd.count("wav2vec2_conformer.encoder.embed_positions.inv_freq"));
  EXPECT_TRUE(at::equal(sd.at("wav2vec2_conformer.encoder.embed_positions.inv_freq"), inv));
  for (const char* arch :
       {"Wav2Vec2ConformerForSequenceClassification",
        "Wav2Vec2ConformerForAudioFrameClassification", "Wav2Vec2ConformerForXVector"}) {
    auto m = testing::Build(arch);
    ASSERT_TRUE(m) << arch;
    EXPECT_TRUE(testing::HasWeight(
        *m, "wav2vec2_conformer.encoder.layers.0.conv_module.depthwise_conv.weight"));
  }
  auto rel = testing::Build("Wav2Vec2ConformerModel");
  ASSERT_TRUE(rel);
  EXPECT_TRUE(testing::HasWeight(*rel, "encoder.layers.0.self_attn.pos_bias_u"));
  const TensorMap rsd = StateDict(*rel, rel->InitWeights(5), 1);
  EXPECT_FALSE(rsd.count("encoder.embed_positions.inv_freq"));
}

}  // namespace
}  // namespace ts::zoo
