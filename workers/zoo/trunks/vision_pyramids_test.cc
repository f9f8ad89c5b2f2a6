// The conv and pyramid vision backbones added for issue 33 (regnet, poolformer, dinov3_convnext,
// pvt_v2, pvt, cvt) against references written from transformers' modeling files in double (not
// from the zoo's trunks).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/trunks/vision_formula_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;

using testing::Lin;
using testing::Ln;
using testing::Ran;
using testing::RunClass;

// ---- regnet (modeling_regnet.py)

// RegNetConvLayer: conv (padding k / 2, no bias), eval BatchNorm, the activation when `act`.
at::Tensor RefRegNetConv(const WeightMap& w, const std::string& p, const at::Tensor& x,
                         int64_t stride, int64_t groups, bool act) {
  const at::Tensor& k = w.at(p + "convolution.weight");
  at::Tensor y = at::conv2d(x, k, {}, stride, k.size(-1) / 2, 1, groups);
  const std::string n = p + "normalization.";
  y = at::batch_norm(y, w.at(n + "weight"), w.at(n + "bias"), w.at(n + "running_mean"),
                     w.at(n + "running_var"), false, 0.0, 1e-5, false);
  return act ? at::relu(y) : y;
}

// RegNetModel's last_hidden_state (hidden_act relu).
at::Tensor RefRegNet(const WeightMap& w, const std::string& pre, const json& c,
                     const at::Tensor& pixels) {
  const auto hs = c.at("hidden_sizes").get<std::vector<int64_t>>();
  const auto depths = c.at("depths").get<std::vector<int64_t>>();
  const int64_t gw = c.at("groups_width");
  const bool y_layers = c.at("layer_type") == "y";
  at::Tensor x = RefRegNetConv(w, pre + "embedder.embedder.", pixels, 2, 1, true);
  int64_t in = c.at("embedding_size");
  for (size_t s = 0; s < hs.size(); ++s) {
    for (int64_t l = 0; l < depths[s]; ++l) {
      const std::string lp =
          pre + "encoder.stages." + std::to_string(s) + ".layers." + std::to_string(l) + ".";
      const int64_t out = hs[s];
      const int64_t stride = l > 0                                                   ? 1
                             : (s > 0 || c.value("downsample_in_first_stage", true)) ? 2
                                                                                     : 1;
      at::Tensor h = RefRegNetConv(w, lp + "layer.0.", x, 1, 1, true);
      h = RefRegNetConv(w, lp + "layer.1.", h, stride, std::max<int64_t>(1, out / gw), true);
      if (y_layers) {  // RegNetSELayer
        const std::string a = lp + "layer.2.attention.";
        at::Tensor att = at::adaptive_avg_pool2d(h, {1, 1});
        att = at::relu(at::conv2d(att, w.at(a + "1.weight"), w.at(a + "1.bias")));
        h = h * at::sigmoid(at::conv2d(att, w.at(a + "3.weight"), w.at(a + "3.bias")));
      }
      h = RefRegNetConv(w, lp + (y_layers ? "layer.3." : "layer.2."), h, 1, 1, false);
      const bool project = in != out || stride != 1;
      at::Tensor res = project ? RefRegNetConv(w, lp + "shortcut.", x, stride, 1, false) : x;
      x = at::relu(h + res);
      in = out;
    }
  }
  return x;
}

TEST(VisionBackbonesTest, RegNetYAndXLayersAsTransformers) {
  Ran model = RunClass("RegNetModel");
  ASSERT_TRUE(model.m);
  const json& c = model.m->spec().tiny_config;
  EXPECT_EQ(c.at("groups_width"), 8);
  const at::Tensor last = RefRegNet(model.w, "", c, model.pixels);
  EXPECT_LT(testing::MaxAbs(model.out[0], last), 1e-10);
  EXPECT_LT(testing::MaxAbs(model.out[1], at::adaptive_avg_pool2d(last, {1, 1})), 1e-10);
  // round(in_channels / 4) of stage 2's first layer (in 16).
  EXPECT_EQ(
      testing::WeightShape(*model.m, "encoder.stages.2.layers.0.layer.2.attention.1.weight")[0], 4);

  json cfg = *ExampleConfig("RegNetForImageClassification");
  cfg["layer_type"] = "x";
  cfg["downsample_in_first_stage"] = false;
  Ran cls = RunClass("RegNetForImageClassification", cfg);
  ASSERT_TRUE(cls.m);
  const at::Tensor l2 = RefRegNet(cls.w, "regnet.", cls.m->spec().tiny_config, cls.pixels);
  EXPECT_LT(testing::MaxAbs(cls.out[0], Lin(cls.w, "classifier.1", l2.mean({2, 3}))), 1e-10);
  EXPECT_FALSE(
      testing::HasWeight(*cls.m, "regnet.encoder.stages.0.layers.0.layer.3.convolution.weight"));
  testing::ExpectConfigError("RegNetModel", "layer_type", "z", "layer_type");
  testing::ExpectConfigError("RegNetModel", "groups_width", 100, "groups_width");
}

// ---- poolformer (modeling_poolformer.py)

at::Tensor RefGroupNorm1(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return at::group_norm(x, 1, w.at(p + ".weight"), w.at(p + ".bias"), 1e-5);
}

// PoolFormerModel's last_hidden_state (use_layer_scale true, gelu).
at::Tensor RefPoolFormer(const WeightMap& w, const std::string& pre, const json& c,
                         const at::Tensor& pixels) {
  const auto hs = c.at("hidden_sizes").get<std::vector<int64_t>>();
  const auto depths = c.at("depths").get<std::vector<int64_t>>();
  const auto strides = c.at("strides").get<std::vector<int64_t>>();
  const auto padding = c.at("padding").get<std::vector<int64_t>>();
  const int64_t k = c.at("pool_size");
  at::Tensor x = pixels;
  for (size_t i = 0; i < hs.size(); ++i) {
    const std::string e = pre + "encoder.patch_embeddings." + std::to_string(i) + ".projection.";
    x = at::conv2d(x, w.at(e + "weight"), w.at(e + "bias"), strides[i], padding[i]);
    for (int64_t j = 0; j < depths[i]; ++j) {
      const std::string l =
          pre + "encoder.block." + std::to_string(i) + "." + std::to_string(j) + ".";
      at::Tensor n = RefGroupNorm1(w, l + "before_norm", x);
      at::Tensor pooled = at::avg_pool2d(n, {k, k}, {1, 1}, {k / 2, k / 2}, false, false) - n;
      x = x + w.at(l + "layer_scale_1").unsqueeze(-1).unsqueeze(-1) * pooled;
      at::Tensor o = at::conv2d(RefGroupNorm1(w, l + "after_norm", x),
                                w.at(l + "output.conv1.weight"), w.at(l + "output.conv1.bias"));
      o = at::conv2d(at::gelu(o), w.at(l + "output.conv2.weight"), w.at(l + "output.conv2.bias"));
      x = x + w.at(l + "layer_scale_2").unsqueeze(-1).unsqueeze(-1) * o;
    }
  }
  return x;
}

TEST(VisionBackbonesTest, PoolFormerPoolsMinusInputWithOneGroupNormsAsTransformers) {
  Ran model = RunClass("PoolFormerModel");
  ASSERT_TRUE(model.m);
  const json& c = model.m->spec().tiny_config;
  const at::Tensor last = RefPoolFormer(model.w, "", c, model.pixels);
  ASSERT_EQ(model.out.size(), 1u);  // no pooler_output
  EXPECT_EQ(last.sizes(), (at::IntArrayRef{2, 128, 1, 1}));
  EXPECT_LT(testing::MaxAbs(model.out[0], last), 1e-10);

  // A wider image keeps a 2 x 2 last map, so that the pooling's edges (count_include_pad false)
  // and the classifier's spatial mean are exercised.
  json cfg = *ExampleConfig("PoolFormerForImageClassification");
  cfg["strides"] = {4, 2, 2, 1};
  Ran cls = RunClass("PoolFormerForImageClassification", cfg);
  ASSERT_TRUE(cls.m);
  const at::Tensor l2 = RefPoolFormer(cls.w, "poolformer.", cls.m->spec().tiny_config, cls.pixels);
  EXPECT_EQ(l2.size(-1), 2);
  const at::Tensor feats = RefGroupNorm1(cls.w, "norm", l2).mean({-2, -1});
  EXPECT_LT(testing::MaxAbs(cls.out[0], Lin(cls.w, "classifier", feats)), 1e-10);
  testing::ExpectConfigError("PoolFormerModel", "pool_size", 4, "pool_size");
  testing::ExpectConfigError("PoolFormerModel", "strides", json({4, 2, 2}), "strides");
}

// ---- dinov3_convnext (modeling_dinov3_convnext.py)

// The stages' output map [B, C, H, W].
at::Tensor RefDinov3ConvNextStages(const WeightMap& w, const json& c, const at::Tensor& pixels) {
  const auto hs = c.at("hidden_sizes").get<std::vector<int64_t>>();
  const auto depths = c.at("depths").get<std::vector<int64_t>>();
  const double eps = c.value("layer_norm_eps", 1e-6);
  auto ln_first = [&](const std::string& p, const at::Tensor& x) {
    return Ln(w, p, x.permute({0, 2, 3, 1}), eps).permute({0, 3, 1, 2});
  };
  at::Tensor x = pixels;
  for (size_t i = 0; i < hs.size(); ++i) {
    const std::string d = "stages." + std::to_string(i) + ".downsample_layers.";
    if (i == 0) {
      x = ln_first(d + "1", at::conv2d(x, w.at(d + "0.weight"), w.at(d + "0.bias"), 4));
    } else {
      x = at::conv2d(ln_first(d + "0", x), w.at(d + "1.weight"), w.at(d + "1.bias"), 2);
    }
    for (int64_t j = 0; j < depths[i]; ++j) {
      const std::string l = "stages." + std::to_string(i) + ".layers." + std::to_string(j) + ".";
      at::Tensor y = at::conv2d(x, w.at(l + "depthwise_conv.weight"),
                                w.at(l + "depthwise_conv.bias"), 1, 3, 1, x.size(1));
      y = Ln(w, l + "layer_norm", y.permute({0, 2, 3, 1}), eps);
      y = Lin(w, l + "pointwise_conv2", at::gelu(Lin(w, l + "pointwise_conv1", y)));
      x = x + (y * w.at(l + "gamma")).permute({0, 3, 1, 2});
    }
  }
  return x;
}

TEST(VisionBackbonesTest, Dinov3ConvNextPrependsThePooledTokenAsTransformers) {
  Ran model = RunClass("DINOv3ConvNextModel");
  ASSERT_TRUE(model.m);
  const json& c = model.m->spec().tiny_config;
  const at::Tensor map = RefDinov3ConvNextStages(model.w, c, model.pixels);
  const at::Tensor pooled = at::adaptive_avg_pool2d(map, {1, 1}).flatten(2).transpose(1, 2);
  const at::Tensor seq =
      Ln(model.w, "layer_norm", at::cat({pooled, map.flatten(2).transpose(1, 2)}, 1), 1e-6);
  EXPECT_LT(testing::MaxAbs(model.out[0], seq), 1e-10);
  EXPECT_LT(testing::MaxAbs(model.out[1], seq.select(1, 0)), 1e-10);

  Ran bb = RunClass("DINOv3ConvNextBackbone");
  ASSERT_TRUE(bb.m);
  EXPECT_EQ(bb.m->spec().task, "backbone");
  EXPECT_FALSE(testing::HasWeight(*bb.m, "layer_norm.weight"));
  EXPECT_LT(testing::MaxAbs(bb.out[0],
                            RefDinov3ConvNextStages(bb.w, bb.m->spec().tiny_config, bb.pixels)),
            1e-10);
  testing::ExpectConfigError("DINOv3ConvNextModel", "depths", json({3, 3}), "depths");
  testing::ExpectConfigError("DINOv3ConvNextBackbone", "out_features", json{"stage1"},
                             "out_features");
}

// ---- pvt_v2 (modeling_pvt_v2.py)

// PvtV2Model's last_hidden_state [B, C, H, W] (gelu).
at::Tensor RefPvtV2(const WeightMap& w, const std::string& pre, const json& c,
                    const at::Tensor& pixels) {
  const auto hs = c.at("hidden_sizes").get<std::vector<int64_t>>();
  const auto depths = c.at("depths").get<std::vector<int64_t>>();
  const auto heads = c.at("num_attention_heads").get<std::vector<int64_t>>();
  const auto srs = c.at("sr_ratios").get<std::vector<int64_t>>();
  const auto patches = c.at("patch_sizes").get<std::vector<int64_t>>();
  const auto strides = c.at("strides").get<std::vector<int64_t>>();
  const double eps = c.at("layer_norm_eps");
  const int64_t b = pixels.size(0);
  at::Tensor x = pixels;
  for (size_t i = 0; i < hs.size(); ++i) {
    const std::string e = pre + "encoder.patch_embeddings." + std::to_string(i) + ".";
    x = at::conv2d(x, w.at(e + "proj.weight"), w.at(e + "proj.bias"), strides[i], patches[i] / 2);
    const int64_t ht = x.size(2), wd = x.size(3), n = ht * wd, h = hs[i], hd = h / heads[i];
    x = Ln(w, e + "layer_norm", x.flatten(2).transpose(1, 2), 1e-5);
    for (int64_t j = 0; j < depths[i]; ++j) {
      const std::string l =
          pre + "encoder.block." + std::to_string(i) + "." + std::to_string(j) + ".";
      at::Tensor y = Ln(w, l + "layer_norm_1", x, eps);
      at::Tensor kv = y;
      if (srs[i] > 1) {
        kv = at::conv2d(y.permute({0, 2, 1}).reshape({b, h, ht, wd}),
                        w.at(l + "attention.sr.weight"), w.at(l + "attention.sr.bias"), srs[i]);
        kv = Ln(w, l + "attention.layer_norm", kv.reshape({b, h, -1}).permute({0, 2, 1}), eps);
      }
      auto split = [&](const at::Tensor& t) {
        return t.view({b, t.size(1), heads[i], hd}).permute({0, 2, 1, 3});
      };
      at::Tensor q = split(Lin(w, l + "attention.query", y));
      at::Tensor k = split(Lin(w, l + "attention.key", kv)),
                 v = split(Lin(w, l + "attention.value", kv));
      at::Tensor probs = at::softmax(at::matmul(q, k.transpose(-1, -2)) / std::sqrt(1.0 * hd), -1);
      x = x + Lin(w, l + "attention.proj", at::matmul(probs, v).transpose(1, 2).reshape({b, n, h}));
      at::Tensor m = Lin(w, l + "mlp.dense1", Ln(w, l + "layer_norm_2", x, eps));
      const int64_t inner = m.size(2);
      m = at::conv2d(m.transpose(1, 2).view({b, inner, ht, wd}),
                     w.at(l + "mlp.dwconv.dwconv.weight"), w.at(l + "mlp.dwconv.dwconv.bias"), 1, 1,
                     1, inner);
      x = x + Lin(w, l + "mlp.dense2", at::gelu(m.flatten(2).transpose(1, 2)));
    }
    x = Ln(w, pre + "encoder.layer_norms." + std::to_string(i), x, 1e-5);
    x = x.reshape({b, ht, wd, -1}).permute({0, 3, 1, 2});
  }
  return x;
}

TEST(VisionBackbonesTest, PvtV2SpatialReductionAttentionAndConvFfnAsTransformers) {
  Ran model = RunClass("PvtV2Model");
  ASSERT_TRUE(model.m);
  const json& c = model.m->spec().tiny_config;
  EXPECT_EQ(c.at("hidden_sizes"), json({16, 32, 80, 128}));
  EXPECT_EQ(c.at("sr_ratios"), json({2, 1, 1, 1}));  // stage 0: 8 x 8 queries, 4 x 4 keys
  const at::Tensor last = RefPvtV2(model.w, "", c, model.pixels);
  ASSERT_EQ(model.out.size(), 1u);
  EXPECT_LT(testing::MaxAbs(model.out[0], last), 1e-10);

  Ran cls = RunClass("PvtV2ForImageClassification");
  ASSERT_TRUE(cls.m);
  const at::Tensor l2 = RefPvtV2(cls.w, "pvt_v2.", cls.m->spec().tiny_config, cls.pixels);
  EXPECT_LT(testing::MaxAbs(cls.out[0], Lin(cls.w, "classifier", l2.flatten(2).mean(2))), 1e-10);

  Ran bb = RunClass("PvtV2Backbone");
  ASSERT_TRUE(bb.m);
  EXPECT_LT(testing::MaxAbs(bb.out[0], RefPvtV2(bb.w, "", bb.m->spec().tiny_config, bb.pixels)),
            1e-10);
  testing::ExpectConfigError("PvtV2Model", "linear_attention", true, "linear_attention");
  testing::ExpectConfigError("PvtV2Model", "mlp_ratios", json({8, 8}), "mlp_ratios");
  testing::ExpectConfigError("PvtV2Model", "num_attention_heads", json({1, 2, 7, 8}),
                             "num_attention_heads");
}

// ---- pvt (modeling_pvt.py)

// PvtModel's last_hidden_state [B, 1 + grid^2, C] (gelu).
at::Tensor RefPvt(const WeightMap& w, const std::string& pre, const json& c,
                  const at::Tensor& pixels) {
  const auto hs = c.at("hidden_sizes").get<std::vector<int64_t>>();
  const auto depths = c.at("depths").get<std::vector<int64_t>>();
  const auto heads = c.at("num_attention_heads").get<std::vector<int64_t>>();
  const auto srs = c.at("sequence_reduction_ratios").get<std::vector<int64_t>>();
  const auto patches = c.at("patch_sizes").get<std::vector<int64_t>>();
  const double eps = c.at("layer_norm_eps");
  const int64_t b = pixels.size(0);
  const size_t last = hs.size() - 1;
  at::Tensor x = pixels;
  for (size_t i = 0; i < hs.size(); ++i) {
    const std::string e = pre + "encoder.patch_embeddings." + std::to_string(i) + ".";
    x = at::conv2d(x, w.at(e + "projection.weight"), w.at(e + "projection.bias"), patches[i]);
    const int64_t ht = x.size(2), wd = x.size(3), h = hs[i], hd = h / heads[i];
    x = Ln(w, e + "layer_norm", x.flatten(2).transpose(1, 2), eps);
    if (i == last) x = at::cat({w.at(e + "cls_token").expand({b, -1, -1}), x}, 1);
    x = x + w.at(e + "position_embeddings");
    const int64_t n = x.size(1);
    for (int64_t j = 0; j < depths[i]; ++j) {
      const std::string l =
          pre + "encoder.block." + std::to_string(i) + "." + std::to_string(j) + ".";
      const std::string a = l + "attention.self.";
      at::Tensor y = Ln(w, l + "layer_norm_1", x, eps);
      at::Tensor kv = y;
      if (srs[i] > 1) {
        kv = at::conv2d(y.permute({0, 2, 1}).reshape({b, h, ht, wd}), w.at(a + "sr.weight"),
                        w.at(a + "sr.bias"), srs[i]);
        kv = Ln(w, a + "layer_norm", kv.reshape({b, h, -1}).permute({0, 2, 1}), eps);
      }
      auto split = [&](const at::Tensor& t) {
        return t.view({b, t.size(1), heads[i], hd}).permute({0, 2, 1, 3});
      };
      at::Tensor q = split(Lin(w, a + "query", y));
      at::Tensor k = split(Lin(w, a + "key", kv)), v = split(Lin(w, a + "value", kv));
      at::Tensor probs = at::softmax(at::matmul(q, k.transpose(-1, -2)) / std::sqrt(1.0 * hd), -1);
      x = x + Lin(w, l + "attention.output.dense",
                  at::matmul(probs, v).permute({0, 2, 1, 3}).reshape({b, n, h}));
      x = x + Lin(w, l + "mlp.dense2",
                  at::gelu(Lin(w, l + "mlp.dense1", Ln(w, l + "layer_norm_2", x, eps))));
    }
    if (i != last) x = x.reshape({b, ht, wd, -1}).permute({0, 3, 1, 2});
  }
  return Ln(w, pre + "encoder.layer_norm", x, eps);
}

TEST(VisionBackbonesTest, PvtReducedAttentionAndLastStageClsTokenAsTransformers) {
  Ran model = RunClass("PvtModel");
  ASSERT_TRUE(model.m);
  const json& c = model.m->spec().tiny_config;
  EXPECT_EQ(c.at("sequence_reduction_ratios"), json({2, 1, 1, 1}));
  const at::Tensor seq = RefPvt(model.w, "", c, model.pixels);
  ASSERT_EQ(model.out.size(), 1u);
  EXPECT_EQ(seq.size(1), 2);  // the cls token and the last stage's 1 x 1 grid
  EXPECT_LT(testing::MaxAbs(model.out[0], seq), 1e-10);

  Ran cls = RunClass("PvtForImageClassification");
  ASSERT_TRUE(cls.m);
  const at::Tensor s2 = RefPvt(cls.w, "pvt.", cls.m->spec().tiny_config, cls.pixels);
  EXPECT_LT(testing::MaxAbs(cls.out[0], Lin(cls.w, "classifier", s2.select(1, 0))), 1e-10);
  testing::ExpectConfigError("PvtModel", "sequence_reduction_ratios", json({8, 4, 2, 2}),
                             "sequence_reduction_ratios");
  testing::ExpectConfigError("PvtModel", "patch_sizes", json({4, 2, 4, 2}), "patch_sizes");
}

// ---- cvt (modeling_cvt.py)

// CvtEncoder's last map and the last stage's cls token (undefined without one).
std::pair<at::Tensor, at::Tensor> RefCvt(const WeightMap& w, const std::string& pre, const json& c,
                                         const at::Tensor& pixels) {
  const auto dims = c.at("embed_dim").get<std::vector<int64_t>>();
  const auto heads = c.at("num_heads").get<std::vector<int64_t>>();
  const auto depth = c.at("depth").get<std::vector<int64_t>>();
  const auto stride = c.at("patch_stride").get<std::vector<int64_t>>();
  const auto pad = c.at("patch_padding").get<std::vector<int64_t>>();
  const auto stride_kv = c.at("stride_kv").get<std::vector<int64_t>>();
  const auto pad_kv = c.at("padding_kv").get<std::vector<int64_t>>();
  const auto pad_q = c.at("padding_q").get<std::vector<int64_t>>();
  const auto with_cls = c.at("cls_token").get<std::vector<bool>>();
  const int64_t b = pixels.size(0);
  at::Tensor x = pixels, cls;
  for (size_t i = 0; i < dims.size(); ++i) {
    const std::string s = pre + "encoder.stages." + std::to_string(i) + ".";
    const std::string e = s + "embedding.convolution_embeddings.";
    x = at::conv2d(x, w.at(e + "projection.weight"), w.at(e + "projection.bias"), stride[i],
                   pad[i]);
    const int64_t d = dims[i], ht = x.size(2), wd = x.size(3), hw = ht * wd, hd = d / heads[i];
    x = Ln(w, e + "normalization", x.view({b, d, hw}).permute({0, 2, 1}), 1e-5);
    if (with_cls[i]) x = at::cat({w.at(s + "cls_token").expand({b, -1, -1}), x}, 1);
    for (int64_t j = 0; j < depth[i]; ++j) {
      const std::string l = s + "layers." + std::to_string(j) + ".";
      const std::string a = l + "attention.attention.";
      at::Tensor y = Ln(w, l + "layernorm_before", x, 1e-5);
      at::Tensor ct, t = y;
      if (with_cls[i]) {
        ct = y.narrow(1, 0, 1);
        t = y.narrow(1, 1, hw);
      }
      at::Tensor map = t.permute({0, 2, 1}).reshape({b, d, ht, wd});
      auto proj = [&](const char* m, int64_t st, int64_t p) {
        const std::string cp = a + "convolution_projection_" + m + ".convolution_projection.";
        at::Tensor r = at::conv2d(map, w.at(cp + "convolution.weight"), {}, st, p, 1, d);
        const std::string n = cp + "normalization.";
        r = at::batch_norm(r, w.at(n + "weight"), w.at(n + "bias"), w.at(n + "running_mean"),
                           w.at(n + "running_var"), false, 0.0, 1e-5, false);
        r = r.view({b, d, -1}).permute({0, 2, 1});
        if (with_cls[i]) r = at::cat({ct, r}, 1);
        r = Lin(w, a + "projection_" + m, r);
        return r.view({b, r.size(1), heads[i], hd}).permute({0, 2, 1, 3});
      };
      at::Tensor q = proj("query", 1, pad_q[i]), k = proj("key", stride_kv[i], pad_kv[i]);
      at::Tensor v = proj("value", stride_kv[i], pad_kv[i]);
      at::Tensor probs = at::softmax(at::matmul(q, k.transpose(-1, -2)) * std::pow(d, -0.5), -1);
      at::Tensor ctx = at::matmul(probs, v).permute({0, 2, 1, 3}).reshape({b, -1, d});
      x = x + Lin(w, l + "attention.output.dense", ctx);
      at::Tensor m =
          at::gelu(Lin(w, l + "intermediate.dense", Ln(w, l + "layernorm_after", x, 1e-5)));
      x = x + Lin(w, l + "output.dense", m);
    }
    cls = at::Tensor();
    if (with_cls[i]) {
      cls = x.narrow(1, 0, 1);
      x = x.narrow(1, 1, hw);
    }
    x = x.permute({0, 2, 1}).reshape({b, d, ht, wd});
  }
  return {x, cls};
}

TEST(VisionBackbonesTest, CvtConvolutionalProjectionsAndClsTokenAsTransformers) {
  Ran model = RunClass("CvtModel");
  ASSERT_TRUE(model.m);
  const json& c = model.m->spec().tiny_config;
  EXPECT_EQ(c.at("embed_dim"), json({16, 48, 96}));
  const auto [map, cls_token] = RefCvt(model.w, "", c, model.pixels);
  ASSERT_EQ(model.out.size(), 1u);
  EXPECT_LT(testing::MaxAbs(model.out[0], map), 1e-10);

  Ran cls = RunClass("CvtForImageClassification");
  ASSERT_TRUE(cls.m);
  const auto [m2, c2] = RefCvt(cls.w, "cvt.", cls.m->spec().tiny_config, cls.pixels);
  ASSERT_TRUE(c2.defined());
  const at::Tensor feats = Ln(cls.w, "layernorm", c2, 1e-5).mean(1);
  EXPECT_LT(testing::MaxAbs(cls.out[0], Lin(cls.w, "classifier", feats)), 1e-10);

  // Without a cls token the classifier reads the last map's tokens.
  json cfg = *ExampleConfig("CvtForImageClassification");
  cfg["cls_token"] = {false, false, false};
  Ran nc = RunClass("CvtForImageClassification", cfg);
  ASSERT_TRUE(nc.m);
  const auto [m3, c3] = RefCvt(nc.w, "cvt.", nc.m->spec().tiny_config, nc.pixels);
  const at::Tensor f3 = Ln(nc.w, "layernorm", m3.flatten(2).transpose(1, 2), 1e-5).mean(1);
  EXPECT_LT(testing::MaxAbs(nc.out[0], Lin(nc.w, "classifier", f3)), 1e-10);
  testing::ExpectConfigError("CvtModel", "qkv_projection_method", json({"avg", "dw_bn", "dw_bn"}),
                             "qkv_projection_method");
  testing::ExpectConfigError("CvtModel", "num_heads", json({1, 3}), "num_heads");
}

}  // namespace
}  // namespace ts::zoo
