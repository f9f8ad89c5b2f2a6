// speech_to_text (families/speech_to_text.cc) against a reference written here from
// modeling_speech_to_text.py in double from at:: ops (Conv1dSubsampler as at::conv1d and
// at::glu, BART-style attention with q scaled before the product, the sinusoid table built as
// get_embedding builds it in float32 and indexed by create_position_ids_from_input_ids), never
// from the zoo's own code.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;

using testing::LinWithBias;
using testing::Ln;

constexpr double kLnEps = 1e-5;  // every nn.LayerNorm here: the default eps

// get_embedding(rows, d, padding_idx) in float32, then the rows create_position_ids_from_input_ids
// picks for `ids` (mask = ids != pad; cumsum(mask) * mask + pad).
at::Tensor Sinusoid(const at::Tensor& ids, int64_t d, int64_t pad) {
  const int64_t half = d / 2, rows = pad + 1 + ids.size(1) + 2;
  const double step = std::log(10000.0) / static_cast<double>(half - 1);
  at::Tensor e = at::exp(at::arange(half, at::kFloat) * -step);
  e = at::arange(rows, at::kFloat).unsqueeze(1) * e.unsqueeze(0);
  at::Tensor table = at::cat({at::sin(e), at::cos(e)}, 1);
  table[pad].zero_();
  at::Tensor mask = ids.ne(pad).to(at::kInt);
  at::Tensor pos = (at::cumsum(mask, 1).to(at::kInt) * mask).to(at::kLong) + pad;
  return table.index_select(0, pos.view(-1)).view({ids.size(0), ids.size(1), d}).to(at::kDouble);
}

at::Tensor Attn(const WeightMap& w, const std::string& p, const at::Tensor& x, const at::Tensor& kv,
                int64_t heads, bool causal) {
  const int64_t b = x.size(0), t = x.size(1), s = kv.size(1), d = x.size(2), hd = d / heads;
  auto shape = [&](const at::Tensor& y, int64_t n) {
    return y.view({b, n, heads, hd}).transpose(1, 2).reshape({b * heads, n, hd});
  };
  at::Tensor q = shape(LinWithBias(w, p + ".q_proj", x) * std::pow(hd, -0.5), t);
  at::Tensor k = shape(LinWithBias(w, p + ".k_proj", kv), s),
             v = shape(LinWithBias(w, p + ".v_proj", kv), s);
  at::Tensor scores = at::bmm(q, k.transpose(1, 2));
  if (causal) {
    at::Tensor m = at::full({t, s}, std::numeric_limits<double>::lowest(), at::kDouble).triu(1);
    scores = scores + m;
  }
  at::Tensor out = at::bmm(at::softmax(scores, -1), v).view({b, heads, t, hd}).transpose(1, 2);
  return LinWithBias(w, p + ".out_proj", out.reshape({b, t, d}));
}

// Speech2TextModel.forward without masks: {decoder last_hidden_state, encoder output}.
std::vector<at::Tensor> RefS2t(const WeightMap& w, const json& c, const at::Tensor& feats,
                               const at::Tensor& dec_ids) {
  const int64_t d = c.at("d_model").get<int64_t>(), pad = c.at("pad_token_id").get<int64_t>();
  const double scale = c.at("scale_embedding").get<bool>() ? std::sqrt(1.0 * d) : 1.0;
  at::Tensor x = feats.transpose(1, 2);
  const auto kernels = c.at("conv_kernel_sizes").get<std::vector<int64_t>>();
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string p = "model.encoder.conv.conv_layers." + std::to_string(i);
    x = at::glu(at::conv1d(x, w.at(p + ".weight"), w.at(p + ".bias"), {2}, {kernels[i] / 2}), 1);
  }
  x = x.transpose(1, 2) * scale;
  x = x + Sinusoid(at::zeros({x.size(0), x.size(1)}, at::kLong), d, pad);
  const int64_t eh = c.at("encoder_attention_heads").get<int64_t>();
  for (int64_t i = 0; i < c.at("encoder_layers").get<int64_t>(); ++i) {
    const std::string p = "model.encoder.layers." + std::to_string(i) + ".";
    at::Tensor h = Ln(w, p + "self_attn_layer_norm", x, kLnEps);
    x = x + Attn(w, p + "self_attn", h, h, eh, false);
    h = Ln(w, p + "final_layer_norm", x, kLnEps);
    x = x + LinWithBias(w, p + "fc2", at::relu(LinWithBias(w, p + "fc1", h)));
  }
  const at::Tensor enc = Ln(w, "model.encoder.layer_norm", x, kLnEps);
  at::Tensor y = at::embedding(w.at("model.decoder.embed_tokens.weight"), dec_ids) * scale;
  y = y + Sinusoid(dec_ids, d, pad);
  const int64_t dh = c.at("decoder_attention_heads").get<int64_t>();
  for (int64_t i = 0; i < c.at("decoder_layers").get<int64_t>(); ++i) {
    const std::string p = "model.decoder.layers." + std::to_string(i) + ".";
    at::Tensor h = Ln(w, p + "self_attn_layer_norm", y, kLnEps);
    y = y + Attn(w, p + "self_attn", h, h, dh, true);
    y = y + Attn(w, p + "encoder_attn", Ln(w, p + "encoder_attn_layer_norm", y, kLnEps), enc, dh,
                 false);
    h = Ln(w, p + "final_layer_norm", y, kLnEps);
    y = y + LinWithBias(w, p + "fc2", at::relu(LinWithBias(w, p + "fc1", h)));
  }
  return {Ln(w, "model.decoder.layer_norm", y, kLnEps), enc};
}

// Two layers per stack, three convs of unequal kernels, an odd frame count.
TEST(SpeechToTextTest, SubsamplerSinusoidAndLayersAsTransformers) {
  auto m = testing::Build("Speech2TextModel");
  ASSERT_TRUE(m);
  json c = m->spec().tiny_config;
  EXPECT_EQ(c.at("d_model").get<int64_t>(), 64);
  c["encoder_layers"] = 2;
  c["decoder_layers"] = 2;
  c["num_conv_layers"] = 3;
  c["conv_kernel_sizes"] = {5, 3, 4};
  auto full = testing::BuildFull(c);
  ASSERT_TRUE(full);
  EXPECT_FALSE(testing::HasWeight(*full, "model.encoder.embed_positions.weights"));
  EXPECT_EQ(full->WeightShapes()[4].second,
            (std::vector<int64_t>{2 * 64, c.at("conv_channels").get<int64_t>() / 2, 4}));
  WeightMap w = full->InitWeights(3, at::kDouble);
  Batch b = full->MakeBatch(4, 2);
  b.inputs["input_features"] = b.inputs.at("input_features").slice(1, 0, 31).to(at::kDouble);
  const at::Tensor& dec = b.inputs.at("decoder_input_ids");
  EXPECT_TRUE(dec.eq(c.at("pad_token_id").get<int64_t>()).any().item<bool>());  // padded row
  std::vector<at::Tensor> got = full->Forward(w, b.inputs);
  std::vector<at::Tensor> want = RefS2t(w, c, b.inputs.at("input_features"), dec);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].size(1), 5);  // 31 -> 16 -> 8 -> 5 frames (kernels 5, 3, 4)
  EXPECT_LT(testing::RelDiff(got[1], want[1]), 1e-10);
  EXPECT_LT(testing::RelDiff(got[0], want[0]), 1e-10);
}

// The tied lm_head (a state_dict copy of the decoder's embed_tokens), the loss over labels with
// -100 ignored, the decoder input shift_tokens_right(labels).
TEST(SpeechToTextTest, ConditionalGenerationAsTransformers) {
  auto m = testing::Build("Speech2TextForConditionalGeneration");
  ASSERT_TRUE(m);
  const json& c = m->spec().tiny_config;
  bool tied = false;
  for (const StateDictEntry& e : StateDictShapes(*m)) {
    if (e.name == "lm_head.weight") tied = e.tied_to == "model.decoder.embed_tokens.weight";
  }
  EXPECT_TRUE(tied);
  WeightMap w = m->InitWeights(5, at::kDouble);
  Batch b = m->MakeBatch(6, 2);
  b.inputs["input_features"] = b.inputs.at("input_features").to(at::kDouble);
  const at::Tensor& labels = b.labels.at("labels");
  const at::Tensor& dec = b.inputs.at("decoder_input_ids");
  EXPECT_EQ(dec[0][0].item<int64_t>(), c.at("decoder_start_token_id").get<int64_t>());
  at::Tensor shifted = labels.slice(1, 0, labels.size(1) - 1);
  shifted = shifted.masked_fill(shifted.eq(-100), c.at("pad_token_id").get<int64_t>());
  EXPECT_TRUE(at::equal(dec.slice(1, 1), shifted));
  EXPECT_TRUE(labels.eq(-100).any().item<bool>());
  const at::Tensor logits = at::matmul(RefS2t(w, c, b.inputs.at("input_features"), dec)[0],
                                       w.at("model.decoder.embed_tokens.weight").t());
  EXPECT_LT(testing::RelDiff(m->Forward(w, b.inputs)[0], logits), 1e-10);
  EXPECT_NEAR(m->Loss(w, b).item<double>(),
              at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}))
                  .item<double>(),
              1e-10);
  testing::ExpectConfigError("Speech2TextModel", "conv_kernel_sizes", json::array({5}),
                             "conv_kernel_sizes");
  testing::ExpectConfigError("Speech2TextModel", "conv_channels", 1023, "conv_channels");
  testing::ExpectConfigError("Speech2TextForConditionalGeneration", "tie_word_embeddings", false,
                             "tie_word_embeddings");
}

}  // namespace
}  // namespace ts::zoo
