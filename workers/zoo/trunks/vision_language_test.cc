// LLaVA against a reference written from modeling_llava.py (get_image_features, the projector,
// inputs_embeds.masked_scatter at the image token) over a one-layer llama written from
// modeling_llama.py, in double. The tower's hidden state comes from the zoo's CLIPVisionModel
// (its own class, checked against transformers' state_dict table and cross-check) cut at the
// feature layer.
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
using testing::Rms;

// LlamaModel (one layer) over inputs_embeds `x`, causal with right padding from `mask`, then
// lm_head.
at::Tensor LlamaLogits(const WeightMap& w, const std::string& p, at::Tensor x,
                       const at::Tensor& mask, const json& c) {
  const int64_t heads = c.at("num_attention_heads"), kv = c.at("num_key_value_heads");
  const int64_t hid = c.at("hidden_size"), d = hid / heads, b = x.size(0), s = x.size(1);
  const double eps = c.at("rms_norm_eps"), theta = c.value("rope_theta", 10000.0);
  const std::string l = p + "layers.0.";
  at::Tensor h = Rms(x, w.at(l + "input_layernorm.weight"), eps);
  auto proj = [&](const char* n, int64_t nh) {
    return at::linear(h, w.at(l + "self_attn." + n + ".weight"))
        .view({b, s, nh, d})
        .transpose(1, 2);
  };
  at::Tensor inv = 1.0 / at::pow(theta, at::arange(0, d, 2, at::kDouble) / static_cast<double>(d));
  at::Tensor f = at::outer(at::arange(s, at::kDouble), inv);
  at::Tensor emb = at::cat({f, f}, -1);
  auto rope = [&](const at::Tensor& t) {
    at::Tensor t1 = t.narrow(-1, 0, d / 2), t2 = t.narrow(-1, d / 2, d / 2);
    return t * emb.cos() + at::cat({-t2, t1}, -1) * emb.sin();
  };
  at::Tensor q = rope(proj("q_proj", heads));
  at::Tensor k = rope(proj("k_proj", kv)).repeat_interleave(heads / kv, 1);
  at::Tensor v = proj("v_proj", kv).repeat_interleave(heads / kv, 1);
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
  at::Tensor blocked =
      at::ones({s, s}, at::kBool).triu(1).view({1, 1, s, s}) | mask.eq(0).view({b, 1, 1, s});
  scores = scores.masked_fill(blocked, -std::numeric_limits<double>::infinity());
  at::Tensor a = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({b, s, hid});
  x = x + at::linear(a, w.at(l + "self_attn.o_proj.weight"));
  h = Rms(x, w.at(l + "post_attention_layernorm.weight"), eps);
  const std::string m = l + "mlp.";
  x = x + at::linear(at::silu(at::linear(h, w.at(m + "gate_proj.weight"))) *
                         at::linear(h, w.at(m + "up_proj.weight")),
                     w.at(m + "down_proj.weight"));
  return at::linear(Rms(x, w.at(p + "norm.weight"), eps), w.at("lm_head.weight"));
}

// LlavaMultiModalProjector: linear_2(gelu(linear_1(f))).
at::Tensor Projector(const WeightMap& w, const at::Tensor& f) {
  const std::string p = "model.multi_modal_projector.";
  return at::linear(at::gelu(at::linear(f, w.at(p + "linear_1.weight"), w.at(p + "linear_1.bias"))),
                    w.at(p + "linear_2.weight"), w.at(p + "linear_2.bias"));
}

// The class's two outputs on `in` against the reference: the logits of the one-layer llama over
// the token embeddings with `feats` scattered at the image token (unpadded positions), and the
// image features themselves.
void ExpectSplicedLogits(const Model& m, const WeightMap& w, const TensorMap& in,
                         const at::Tensor& feats) {
  const json& c = m.spec().tiny_config;
  const at::Tensor& ids = in.at("input_ids");
  const int64_t image_token = c.at("image_token_index");
  at::Tensor x = at::embedding(w.at("model.language_model.embed_tokens.weight"), ids);
  x = x.masked_scatter(ids.eq(image_token).unsqueeze(-1).expand_as(x), feats);
  const at::Tensor want =
      LlamaLogits(w, "model.language_model.", x, in.at("attention_mask"), c.at("text_config"));
  const auto out = m.Forward(w, in);
  ASSERT_EQ(out.size(), 2u);
  const at::Tensor attended = in.at("attention_mask").unsqueeze(-1).to(at::kBool);
  EXPECT_LT(testing::MaxAbs(out[0].masked_select(attended), want.masked_select(attended)), 1e-9);
  EXPECT_LT(testing::MaxAbs(out[1], feats), 1e-10);
}

TEST(VisionLanguageTest, LlavaSplicesProjectedTowerFeaturesAtTheImageToken) {
  auto m = testing::Build("LlavaForConditionalGeneration");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->spec().task, "image-text-to-text");
  const json& c = m->spec().tiny_config;
  const int64_t image_token = c.at("image_token_index");
  const WeightMap w = m->InitWeights(3, at::kDouble);
  Batch batch = m->MakeBatch(5, 2);
  batch.inputs["pixel_values"] = batch.inputs.at("pixel_values").to(at::kDouble);
  const at::Tensor& ids = batch.inputs.at("input_ids");
  const int64_t n_img = ids.eq(image_token).sum().item<int64_t>();
  EXPECT_EQ(n_img, 2 * 16);  // 32 px / patch 8 = 16 tokens per image, cls dropped
  EXPECT_TRUE(
      batch.labels.at("labels").masked_select(ids.eq(image_token)).eq(-100).all().item<bool>());

  // hidden_states[-2] of the two-layer tower: the output of its first layer.
  json tower = c.at("vision_config");
  ASSERT_EQ(tower.at("num_hidden_layers"), 2);
  tower["num_hidden_layers"] = 1;
  tower["architectures"] = {"CLIPVisionModel"};
  auto clip = testing::BuildFull(tower);
  ASSERT_TRUE(clip);
  // The model's tower weights; post_layernorm (which LLaVA never reads, so the model has none)
  // from the tower's own initialisation: it only feeds the pooled output, not taken here.
  WeightMap tower_w = clip->InitWeights(1, at::kDouble);
  for (const auto& [n, t] : testing::Unprefixed(w, "model.vision_tower.")) tower_w[n] = t;
  const at::Tensor hs = clip->Forward(tower_w, batch.inputs)[0];
  const at::Tensor feats = Projector(w, hs.narrow(1, 1, hs.size(1) - 1));
  ASSERT_NO_FATAL_FAILURE(ExpectSplicedLogits(*m, w, batch.inputs, feats));

  auto base = testing::BuildSibling(*m, "LlavaModel");
  ASSERT_TRUE(base);
  EXPECT_TRUE(testing::HasWeight(*base, "language_model.layers.0.self_attn.q_proj.weight"));
  EXPECT_TRUE(testing::HasWeight(*base, "vision_tower.encoder.layers.0.mlp.fc1.weight"));
  EXPECT_TRUE(testing::HasWeight(*base, "multi_modal_projector.linear_2.bias"));
  // The tower's last layer and post_layernorm: transformers builds them and LLaVA never calls
  // them (no gradient), so they are state_dict entries, not weights.
  for (const char* unused : {"vision_tower.encoder.layers.1.mlp.fc1.weight",
                             "vision_tower.post_layernorm.weight"}) {
    EXPECT_FALSE(testing::HasWeight(*base, unused)) << unused;
    bool in_state_dict = false;
    for (const auto& e : StateDictShapes(*base)) in_state_dict |= e.name == unused;
    EXPECT_TRUE(in_state_dict) << unused;
  }
  testing::ExpectConfigError("LlavaForConditionalGeneration", "vision_feature_layer", json{-2, -5},
                             "vision_feature_layer");
  testing::ExpectConfigError("LlavaForConditionalGeneration", "vision_feature_select_strategy",
                             "pooled", "vision_feature_select_strategy");
}

// VipLLaVA (modeling_vipllava.py get_image_features, VipLlavaMultiModalProjector): the tower's
// hidden_states at each of vision_feature_layers without the cls token, concatenated, then
// projector_layernorm, linear_1, gelu, linear_2, spliced at the image token into llama.
TEST(VisionLanguageTest, VipLlavaConcatenatesFeatureLayersThroughTheNormedProjector) {
  auto m = testing::Build("VipLlavaForConditionalGeneration");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->spec().task, "image-text-to-text");
  const json& c = m->spec().tiny_config;
  // The real [-2, -5, -8, -11, 6] of a 24-layer tower at the same depths of the 4-layer tiny one.
  ASSERT_EQ(c.at("vision_config").at("num_hidden_layers"), 4);
  ASSERT_EQ(c.at("vision_feature_layers"), json({-1, -2, -2, -3, 1}));
  const WeightMap w = m->InitWeights(3, at::kDouble);
  Batch batch = m->MakeBatch(5, 2);
  batch.inputs["pixel_values"] = batch.inputs.at("pixel_values").to(at::kDouble);

  // hidden_states[i] = the last_hidden_state of the same tower cut to i layers.
  std::vector<at::Tensor> picked;
  for (int64_t layers : {4, 3, 3, 2, 1}) {
    json tower = c.at("vision_config");
    tower["num_hidden_layers"] = layers;
    tower["architectures"] = {"CLIPVisionModel"};
    auto clip = testing::BuildFull(tower);
    ASSERT_TRUE(clip);
    WeightMap tower_w = clip->InitWeights(1, at::kDouble);
    for (auto& [n, t] : testing::Unprefixed(w, "model.vision_tower.")) {
      if (tower_w.count(n)) tower_w[n] = t;
    }
    const at::Tensor hs = clip->Forward(tower_w, batch.inputs)[0];
    picked.push_back(hs.narrow(1, 1, hs.size(1) - 1));
  }
  at::Tensor f = at::cat(picked, -1);
  const std::string p = "model.multi_modal_projector.";
  const int64_t width = f.size(-1);
  EXPECT_EQ(width, 5 * c.at("vision_config").at("hidden_size").get<int64_t>());
  f = at::layer_norm(f, {width}, w.at(p + "projector_layernorm.weight"),
                     w.at(p + "projector_layernorm.bias"), c.value("projector_layernorm_eps", 1e-5));
  const at::Tensor feats = Projector(w, f);
  ASSERT_NO_FATAL_FAILURE(ExpectSplicedLogits(*m, w, batch.inputs, feats));

  auto base = testing::BuildSibling(*m, "VipLlavaModel");
  ASSERT_TRUE(base);
  EXPECT_TRUE(testing::HasWeight(*base, "multi_modal_projector.projector_layernorm.bias"));
  EXPECT_TRUE(testing::HasWeight(*base, "vision_tower.encoder.layers.3.mlp.fc1.weight"));
  EXPECT_FALSE(testing::HasWeight(*base, "vision_tower.post_layernorm.weight"));
  testing::ExpectConfigError("VipLlavaForConditionalGeneration", "vision_feature_layers",
                             json{-2, 30}, "vision_feature_layers");
  testing::ExpectConfigError("VipLlavaForConditionalGeneration", "vision_feature_layers", "all",
                             "vision_feature_layers");
  testing::ExpectConfigError("VipLlavaForConditionalGeneration", "projector_layernorm_eps", 0,
                             "projector_layernorm_eps");
}

// LLaVA-NeXT (modeling_llava_next.py get_image_features, pack_image_features): every view of
// pixel_values [B, 1 + tiles, C, S, S] through the tower and projector, then per image the base
// view's features and the tiles' laid out as [D, grid_h * side, grid_w * side] with image_newline
// appended to each row, spliced at the image token into the (mistral) language model.
TEST(VisionLanguageTest, LlavaNextPacksTheTileGridWithNewlinesAfterTheBaseView) {
  auto m = testing::Build("LlavaNextForConditionalGeneration");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->spec().task, "image-text-to-text");
  const json& c = m->spec().tiny_config;
  ASSERT_EQ(c.at("image_grid_pinpoints").at(0), json({32, 64}));  // [336, 672] at 32 pixels
  const int64_t image_token = c.at("image_token_index");
  const WeightMap w = m->InitWeights(3, at::kDouble);
  Batch batch = m->MakeBatch(5, 2);
  const at::Tensor px = batch.inputs.at("pixel_values").to(at::kDouble);
  ASSERT_EQ(px.sizes(), (std::vector<int64_t>{2, 3, 3, 32, 32}));  // base view + 1 x 2 tiles
  const at::Tensor sizes = batch.inputs.at("image_sizes");
  EXPECT_TRUE(sizes.eq(at::tensor({32, 64}).view({1, 2})).all().item<bool>());
  const at::Tensor& ids = batch.inputs.at("input_ids");
  const int64_t side = 2, tokens = side * side + side * (2 * side + 1);  // 4 + 2 x 5
  EXPECT_EQ(ids.eq(image_token).sum().item<int64_t>(), 2 * tokens);

  json tower = c.at("vision_config");
  tower["num_hidden_layers"] = c.at("vision_config").at("num_hidden_layers").get<int64_t>() - 1;
  tower["architectures"] = {"CLIPVisionModel"};
  auto clip = testing::BuildFull(tower);
  ASSERT_TRUE(clip);
  WeightMap tower_w = clip->InitWeights(1, at::kDouble);
  for (const auto& [n, t] : testing::Unprefixed(w, "model.vision_tower.")) {
    if (tower_w.count(n)) tower_w[n] = t;
  }
  const at::Tensor hs = clip->Forward(tower_w, {{"pixel_values", px.flatten(0, 1)}})[0];
  const at::Tensor f = Projector(w, hs.narrow(1, 1, hs.size(1) - 1));  // [6, 4, D]
  const int64_t d = f.size(-1);
  std::vector<at::Tensor> packed;
  for (int64_t i = 0; i < 2; ++i) {
    at::Tensor views = f.narrow(0, 3 * i, 3);
    at::Tensor g = views.narrow(0, 1, 2).view({1, 2, side, side, d}).permute({4, 0, 2, 1, 3});
    g = g.flatten(1, 2).flatten(2, 3);  // [D, 2, 4]
    g = at::cat({g, w.at("model.image_newline").view({d, 1, 1}).expand({d, side, 1})}, -1);
    packed.push_back(at::cat({views[0], g.flatten(1, 2).transpose(0, 1)}, 0));
  }
  const at::Tensor feats = at::cat(packed, 0);
  TensorMap in = batch.inputs;
  in["pixel_values"] = px;
  ASSERT_NO_FATAL_FAILURE(ExpectSplicedLogits(*m, w, in, feats));

  auto base = testing::BuildSibling(*m, "LlavaNextModel");
  ASSERT_TRUE(base);
  EXPECT_TRUE(testing::HasWeight(*base, "image_newline"));
  testing::ExpectConfigError("LlavaNextForConditionalGeneration",
                             "vision_feature_select_strategy", "full",
                             "vision_feature_select_strategy");
  testing::ExpectConfigError("LlavaNextForConditionalGeneration", "image_grid_pinpoints",
                             json{{336, 500}}, "image_grid_pinpoints");
}

// LLaVA-NeXT-Video (modular_llava_next_video.py): its image path is LLaVA-NeXT's
// (get_image_features, pack_image_features); the same weights give the same outputs.
TEST(VisionLanguageTest, LlavaNextVideoRunsLlavaNextsImagePath) {
  auto m = testing::Build("LlavaNextVideoForConditionalGeneration");
  ASSERT_TRUE(m);
  json c = m->spec().tiny_config;
  EXPECT_NE(c.at("video_token_index"), c.at("image_token_index"));
  c["model_type"] = "llava_next";
  auto next = testing::BuildSibling(*m, "LlavaNextForConditionalGeneration", c);
  ASSERT_TRUE(next);
  const WeightMap w = m->InitWeights(3, at::kDouble);
  Batch batch = m->MakeBatch(5, 2);
  batch.inputs["pixel_values"] = batch.inputs.at("pixel_values").to(at::kDouble);
  const auto got = m->Forward(w, batch.inputs), want = next->Forward(w, batch.inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(at::equal(got[i], want[i])) << i;
  testing::ExpectConfigError("LlavaNextVideoForConditionalGeneration", "spatial_pool_mode", "conv",
                             "spatial_pool_mode");
}

}  // namespace
}  // namespace ts::zoo
