// audio-spectrogram-transformer (families/audio_spectrogram_transformer.cc) against a reference
// written here from modular_audio_spectrogram_transformer.py and transformers 5's ViTLayer, in
// double from at:: ops (the patch embedding as at::conv2d with the frequency / time strides),
// never from the zoo's own code.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;
using testing::LinWithBias;
using testing::Ln;

// ASTModel.forward: {sequence_output, pooled_output}.
std::vector<at::Tensor> RefAst(const WeightMap& w, const std::string& p, const json& c,
                               const at::Tensor& values) {
  const std::string e = p + "embeddings.";
  const int64_t fs = c.at("frequency_stride").get<int64_t>();
  const int64_t ts = c.at("time_stride").get<int64_t>();
  at::Tensor x = at::conv2d(values.unsqueeze(1).transpose(2, 3),
                            w.at(e + "patch_embeddings.projection.weight"),
                            w.at(e + "patch_embeddings.projection.bias"), {fs, ts});
  x = x.flatten(2).transpose(1, 2);
  const int64_t b = x.size(0), h = x.size(2);
  x = at::cat({w.at(e + "cls_token").expand({b, -1, -1}),
               w.at(e + "distillation_token").expand({b, -1, -1}), x},
              1);
  x = x + w.at(e + "position_embeddings");
  const double eps = c.at("layer_norm_eps").get<double>();
  const int64_t heads = c.at("num_attention_heads").get<int64_t>(), hd = h / heads;
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    const std::string lp = p + "layers." + std::to_string(i) + ".";
    at::Tensor y = Ln(w, lp + "layernorm_before", x, eps);
    const int64_t s = y.size(1);
    auto split = [&](const at::Tensor& t) { return t.view({b, s, heads, hd}).transpose(1, 2); };
    at::Tensor q = split(LinWithBias(w, lp + "attention.q_proj", y));
    at::Tensor k = split(LinWithBias(w, lp + "attention.k_proj", y));
    at::Tensor v = split(LinWithBias(w, lp + "attention.v_proj", y));
    at::Tensor probs = at::softmax(at::matmul(q, k.transpose(-1, -2)) / std::sqrt(1.0 * hd), -1);
    at::Tensor ctx = at::matmul(probs, v).transpose(1, 2).reshape({b, s, h});
    x = x + LinWithBias(w, lp + "attention.o_proj", ctx);
    y = Ln(w, lp + "layernorm_after", x, eps);
    x = x + LinWithBias(w, lp + "mlp.fc2", at::gelu(LinWithBias(w, lp + "mlp.fc1", y)));
  }
  at::Tensor seq = Ln(w, p + "layernorm", x, eps);
  return {seq, (seq.select(1, 0) + seq.select(1, 1)) / 2};
}

// The overlapping strided patches of the transposed spectrogram, the two tokens, the mean pooler,
// and ASTMLPHead.
TEST(AudioSpectrogramTest, AstPatchesTokensAndMlpHeadAsTransformers) {
  auto m = testing::Build("ASTModel");
  ASSERT_TRUE(m);
  const json& c = m->spec().tiny_config;
  EXPECT_EQ(c.at("num_mel_bins").get<int64_t>(), 26);  // 2 x 4 overlapping 16 x 16 patches
  EXPECT_EQ(c.at("max_length").get<int64_t>(), 46);
  WeightMap w = m->InitWeights(7, at::kDouble);
  Batch b = m->MakeBatch(2, 2);
  EXPECT_EQ(b.inputs.at("input_values").sizes(), (at::IntArrayRef{2, 46, 26}));
  b.inputs["input_values"] = b.inputs.at("input_values").to(at::kDouble);
  std::vector<at::Tensor> got = m->Forward(w, b.inputs);
  std::vector<at::Tensor> want = RefAst(w, "", c, b.inputs.at("input_values"));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].sizes(), (at::IntArrayRef{2, 10, c.at("hidden_size").get<int64_t>()}));
  EXPECT_LT(testing::RelDiff(got[0], want[0]), 1e-10);
  EXPECT_LT(testing::RelDiff(got[1], want[1]), 1e-10);

  // Unequal strides (time 12 over 3 patches) and qkv_bias false.
  json cfg = *ExampleConfig("ASTForAudioClassification");
  cfg["time_stride"] = 12;
  cfg["frequency_stride"] = 8;
  cfg["qkv_bias"] = false;
  auto cls = testing::Build("ASTForAudioClassification", cfg);
  ASSERT_TRUE(cls);
  EXPECT_FALSE(
      testing::HasWeight(*cls, "audio_spectrogram_transformer.layers.0.attention.q_proj.bias"));
  WeightMap wc = cls->InitWeights(3, at::kDouble);
  for (const char* n : {"q_proj", "k_proj", "v_proj"}) {  // the reference's Linears take a bias
    wc[std::string("audio_spectrogram_transformer.layers.0.attention.") + n + ".bias"] =
        at::zeros({cls->spec().tiny_config.at("hidden_size").get<int64_t>()}, at::kDouble);
  }
  Batch bc = cls->MakeBatch(3, 2);
  bc.inputs["input_values"] = bc.inputs.at("input_values").to(at::kDouble);
  const at::Tensor pooled = RefAst(wc, "audio_spectrogram_transformer.", cls->spec().tiny_config,
                                   bc.inputs.at("input_values"))[1];
  const double eps = cfg.at("layer_norm_eps").get<double>();
  const at::Tensor logits =
      LinWithBias(wc, "classifier.dense", Ln(wc, "classifier.layernorm", pooled, eps));
  EXPECT_LT(testing::RelDiff(cls->Forward(wc, bc.inputs)[0], logits), 1e-10);
  EXPECT_NEAR(cls->Loss(wc, bc).item<double>(),
              at::cross_entropy_loss(logits, bc.labels.at("labels")).item<double>(), 1e-10);
  testing::ExpectConfigError("ASTModel", "num_mel_bins", 8, "num_mel_bins");
  testing::ExpectConfigError("ASTModel", "frequency_stride", 0, "frequency_stride");
}

}  // namespace
}  // namespace ts::zoo
