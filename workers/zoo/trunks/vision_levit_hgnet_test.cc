// LeViT (modeling_levit.py: the conv stem, MLPLayerWithBN, LevitAttention and
// LevitAttentionSubsample with their attention_bias_idxs, the classifiers) and HGNetV2
// (modeling_hgnet_v2.py: the padded stem with its max pool, HGNetV2BasicLayer's plain and light
// layers, aggregation and residual, the learnable affine blocks) against references written in
// double from transformers' sources, not from the zoo's trunks (split from
// vision_convnets_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"
#include "workers/zoo/trunks/vision_formula_test_util.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;
using testing::Ran;
using testing::RefBn;
using testing::RunClass;

// LeViT's attention_bias_idxs as transformers builds it: points of itertools.product, offsets
// (abs(p1[0] * stride - p2[0]), abs(p1[1] * stride - p2[1])) numbered in a dict's insertion
// order.
at::Tensor RefLevitIdxs(int64_t res_in, int64_t res_out, int64_t stride) {
  std::vector<std::pair<int64_t, int64_t>> seen;
  std::vector<int64_t> idx;
  for (int64_t a = 0; a < res_out * res_out; ++a) {
    for (int64_t b = 0; b < res_in * res_in; ++b) {
      const std::pair<int64_t, int64_t> o{std::abs(a / res_out * stride - b / res_in),
                                          std::abs(a % res_out * stride - b % res_in)};
      auto it = std::find(seen.begin(), seen.end(), o);
      idx.push_back(it - seen.begin());
      if (it == seen.end()) seen.push_back(o);
    }
  }
  return at::tensor(idx, at::kLong).view({res_out * res_out, res_in * res_in});
}

// MLPLayerWithBN: linear, then BatchNorm1d over hidden_state.flatten(0, 1).
at::Tensor RefLevitLinBn(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  at::Tensor y = at::linear(x, w.at(p + "linear.weight"));
  return RefBn(w, p + "batch_norm.", y.flatten(0, 1)).reshape_as(y);
}

at::Tensor RefHardswish(const at::Tensor& x) { return x * at::relu6(x + 3) / 6; }

// LevitAttention (sub = false) or LevitAttentionSubsample (stride 2).
at::Tensor RefLevitAttention(const WeightMap& w, const std::string& p, const at::Tensor& x,
                             int64_t heads, int64_t key_dim, int64_t ratio, int64_t res, bool sub) {
  const int64_t bs = x.size(0), n = x.size(1);
  const int64_t res_out = sub ? (res - 1) / 2 + 1 : res;
  at::Tensor q, k, v;
  if (!sub) {
    auto qkv = RefLevitLinBn(w, p + "queries_keys_values.", x)
                   .view({bs, n, heads, -1})
                   .split_with_sizes({key_dim, key_dim, ratio * key_dim}, 3);
    q = qkv[0];
    k = qkv[1];
    v = qkv[2];
  } else {
    auto kv = RefLevitLinBn(w, p + "keys_values.", x)
                  .view({bs, n, heads, -1})
                  .split_with_sizes({key_dim, ratio * key_dim}, 3);
    k = kv[0];
    v = kv[1];
    using at::indexing::None;
    using at::indexing::Slice;
    at::Tensor s = x.view({bs, res, res, x.size(2)})
                       .index({Slice(), Slice(None, None, 2), Slice(None, None, 2)})
                       .reshape({bs, -1, x.size(2)});
    q = RefLevitLinBn(w, p + "queries.", s).view({bs, res_out * res_out, heads, key_dim});
  }
  q = q.permute({0, 2, 1, 3});
  k = k.permute({0, 2, 1, 3});
  v = v.permute({0, 2, 1, 3});
  at::Tensor bias = w.at(p + "attention_biases")
                        .index({at::indexing::Slice(), RefLevitIdxs(res, res_out, sub ? 2 : 1)});
  at::Tensor a = (at::matmul(q, k.transpose(-2, -1)) * std::pow(key_dim, -0.5) + bias).softmax(-1);
  at::Tensor h = at::matmul(a, v).transpose(1, 2).reshape({bs, res_out * res_out, -1});
  return RefLevitLinBn(w, p + "projection.", RefHardswish(h));
}

// LevitModel's last_hidden_state for the tiny config `c` (depths / mlp_ratio as in `c`).
at::Tensor RefLevit(const WeightMap& w, const std::string& p, const json& c, const at::Tensor& px) {
  at::Tensor x = px;
  for (int i = 1; i <= 4; ++i) {
    const std::string e = p + "patch_embeddings.embedding_layer_" + std::to_string(i) + ".";
    x = RefBn(w, e + "batch_norm.", at::conv2d(x, w.at(e + "convolution.weight"), {}, 2, 1));
    if (i < 4) x = at::hardswish(x);
  }
  x = x.flatten(2).transpose(1, 2);
  int64_t res = c.at("image_size").get<int64_t>() / c.at("patch_size").get<int64_t>();
  const auto hidden = c.at("hidden_sizes").get<std::vector<int64_t>>();
  const auto key_dim = c.at("key_dim").get<std::vector<int64_t>>();
  auto mlp = [&](const std::string& q, const at::Tensor& y) {
    return y + RefLevitLinBn(w, q + "linear_down.",
                             RefHardswish(RefLevitLinBn(w, q + "linear_up.", y)));
  };
  for (int s = 0; s < 3; ++s) {
    const std::string sp = p + "encoder.stages." + std::to_string(s) + ".layers.";
    int li = 0;
    for (int64_t d = 0; d < c.at("depths")[s].get<int64_t>(); ++d) {
      x = x + RefLevitAttention(w, sp + std::to_string(li++) + ".module.", x,
                                c.at("num_attention_heads")[s].get<int64_t>(), key_dim[s],
                                c.at("attention_ratio")[s].get<int64_t>(), res, false);
      if (c.at("mlp_ratio")[s].get<int64_t>() > 0)
        x = mlp(sp + std::to_string(li++) + ".module.", x);
    }
    if (s == 2) break;
    x = RefLevitAttention(w, sp + std::to_string(li++) + ".", x, hidden[s] / key_dim[0], key_dim[0],
                          4, res, true);
    res = (res - 1) / 2 + 1;
    x = mlp(sp + std::to_string(li++) + ".module.", x);
  }
  return x;
}

at::Tensor RefLevitClassifier(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return testing::Lin(w, p + "linear", RefBn(w, p + "batch_norm.", x));
}

TEST(LevitTest, AttentionBiasesSubsampleModelAndClassifiersAsTransformers) {
  // transformers' attention_bias_idxs for a 2 x 2 grid: offsets (0,0) (0,1) (1,0) (1,1).
  EXPECT_TRUE(at::equal(
      RefLevitIdxs(2, 2, 1),
      at::tensor({0, 1, 2, 3, 1, 0, 3, 2, 2, 3, 0, 1, 3, 2, 1, 0}, at::kLong).view({4, 4})));
  Ran base = RunClass("LevitModel");
  ASSERT_TRUE(base.m);
  const json& c = base.m->spec().tiny_config;
  ASSERT_EQ(c.at("image_size"), 64);
  at::Tensor last = RefLevit(base.w, "", c, base.pixels);
  ASSERT_EQ(last.sizes(), base.out[0].sizes());
  EXPECT_LT(testing::MaxAbs(base.out[0], last), 1e-10);
  EXPECT_LT(testing::MaxAbs(base.out[1], last.mean(1)), 1e-10);
  // Two blocks in the first stage and no MLP in the second (unscaled): the layer numbering
  // follows.
  json cfg = c;
  cfg["depths"] = {2, 1, 1};
  cfg["mlp_ratio"] = {2, 0, 3};
  auto deep = testing::BuildFull(cfg);
  ASSERT_TRUE(deep);
  WeightMap dw = deep->InitWeights(9, at::kDouble);
  at::Tensor dpx = deep->MakeBatch(4, 2).inputs.at("pixel_values").to(at::kDouble);
  EXPECT_LT(
      testing::MaxAbs(deep->Forward(dw, {{"pixel_values", dpx}})[0], RefLevit(dw, "", cfg, dpx)),
      1e-10);
  Ran r = RunClass("LevitForImageClassification");
  ASSERT_TRUE(r.m);
  at::Tensor pooled = RefLevit(r.w, "levit.", c, r.pixels).mean(1);
  EXPECT_LT(testing::MaxAbs(r.out[0], RefLevitClassifier(r.w, "classifier.", pooled)), 1e-10);
  Ran t = RunClass("LevitForImageClassificationWithTeacher");
  ASSERT_TRUE(t.m);
  ASSERT_EQ(t.out.size(), 3u);
  pooled = RefLevit(t.w, "levit.", c, t.pixels).mean(1);
  at::Tensor cls = RefLevitClassifier(t.w, "classifier.", pooled);
  at::Tensor dist = RefLevitClassifier(t.w, "classifier_distill.", pooled);
  EXPECT_LT(testing::MaxAbs(t.out[0], (cls + dist) / 2), 1e-10);
  EXPECT_LT(testing::MaxAbs(t.out[1], cls), 1e-10);
  EXPECT_LT(testing::MaxAbs(t.out[2], dist), 1e-10);
  testing::ExpectConfigError("LevitModel", "depths", json({4, 4}), "depths");
  testing::ExpectConfigError("LevitModel", "key_dim", json({16, 16}), "key_dim");
  testing::ExpectConfigError("LevitModel", "patch_size", 8, "patch_size");
}

// HGNetV2ConvLayer: conv ((k - 1) / 2 padding, no bias), BatchNorm, act (none / relu), lab.
at::Tensor RefHgConv(const WeightMap& w, const std::string& p, const at::Tensor& x, int64_t stride,
                     int64_t groups, bool act, bool lab) {
  const at::Tensor& k = w.at(p + "convolution.weight");
  at::Tensor y =
      RefBn(w, p + "normalization.", at::conv2d(x, k, {}, stride, (k.size(2) - 1) / 2, 1, groups));
  if (!act) return y;
  y = at::relu(y);
  return lab ? w.at(p + "lab.scale") * y + w.at(p + "lab.bias") : y;
}

// HGNetV2Embeddings then HGNetV2Encoder: the last stage's map.
at::Tensor RefHgnet(const WeightMap& w, const json& c, const at::Tensor& px) {
  const bool lab = c.value("use_learnable_affine_block", false);
  auto conv = [&](const std::string& p, const at::Tensor& x, int64_t s, int64_t g, bool act) {
    return RefHgConv(w, p, x, s, g, act, lab);
  };
  at::Tensor e = at::constant_pad_nd(conv("embedder.stem1.", px, 2, 1, true), {0, 1, 0, 1});
  at::Tensor a = conv("embedder.stem2a.", e, 1, 1, true);
  a = conv("embedder.stem2b.", at::constant_pad_nd(a, {0, 1, 0, 1}), 1, 1, true);
  at::Tensor pooled = at::max_pool2d(e, {2, 2}, {1, 1}, {0, 0}, {1, 1}, true);
  at::Tensor x = conv("embedder.stem3.", at::cat({pooled, a}, 1), 2, 1, true);
  x = conv("embedder.stem4.", x, 1, 1, true);
  const size_t stages = c.at("stage_in_channels").size();
  for (size_t s = 0; s < stages; ++s) {
    const std::string sp = "encoder.stages." + std::to_string(s) + ".";
    if (c.at("stage_downsample")[s].get<bool>())
      x = RefHgConv(w, sp + "downsample.", x, 2, x.size(1), false, false);
    const int64_t mid = c.at("stage_mid_channels")[s];
    for (int64_t b = 0; b < c.at("stage_num_blocks")[s].get<int64_t>(); ++b) {
      const std::string bp = sp + "blocks." + std::to_string(b) + ".";
      std::vector<at::Tensor> out = {x};
      at::Tensor h = x;
      for (int64_t l = 0; l < c.at("stage_numb_of_layers")[s].get<int64_t>(); ++l) {
        const std::string lp = bp + "layers." + std::to_string(l) + ".";
        if (c.at("stage_light_block")[s].get<bool>()) {
          h = RefHgConv(w, lp + "conv1.", h, 1, 1, false, lab);
          h = conv(lp + "conv2.", h, 1, mid, true);
        } else {
          h = conv(lp, h, 1, 1, true);
        }
        out.push_back(h);
      }
      h = conv(bp + "aggregation.1.", conv(bp + "aggregation.0.", at::cat(out, 1), 1, 1, true), 1,
               1, true);
      x = b == 0 ? h : h + x;
    }
  }
  return x;
}

TEST(HgnetV2Test, StemBasicAndLightLayersBackboneAndClassifierAsTransformers) {
  Ran bb = RunClass("HGNetV2Backbone");
  ASSERT_TRUE(bb.m);
  const json& c = bb.m->spec().tiny_config;
  at::Tensor last = RefHgnet(bb.w, c, bb.pixels);
  ASSERT_EQ(last.sizes(), bb.out[0].sizes());
  EXPECT_LT(testing::MaxAbs(bb.out[0], last), 1e-10);
  Ran r = RunClass("HGNetV2ForImageClassification");
  ASSERT_TRUE(r.m);
  at::Tensor feats = RefHgnet(r.w, c, r.pixels).mean({2, 3});
  EXPECT_LT(testing::MaxAbs(r.out[0], testing::Lin(r.w, "fc", feats)), 1e-10);
  // Learnable affine blocks (HGNetV2-B0 .. B6 as D-FINE uses them).
  json cfg = *ExampleConfig("HGNetV2ForImageClassification");
  cfg["use_learnable_affine_block"] = true;
  Ran l = RunClass("HGNetV2ForImageClassification", cfg);
  ASSERT_TRUE(l.m);
  ASSERT_TRUE(l.w.count("encoder.stages.3.blocks.0.layers.0.conv2.lab.scale"));
  EXPECT_FALSE(l.w.count("encoder.stages.3.blocks.0.layers.0.conv1.lab.scale"));
  feats = RefHgnet(l.w, l.m->spec().tiny_config, l.pixels).mean({2, 3});
  EXPECT_LT(testing::MaxAbs(l.out[0], testing::Lin(l.w, "fc", feats)), 1e-10);
  testing::ExpectConfigError("HGNetV2Backbone", "stage_in_channels", json({48, 100, 512, 1024}),
                             "stage_in_channels");
  testing::ExpectConfigError("HGNetV2ForImageClassification", "hidden_sizes", json({256, 512}),
                             "hidden_sizes");
  testing::ExpectConfigError("HGNetV2Backbone", "stage_light_block", json({false}),
                             "stage_light_block");
}

}  // namespace
}  // namespace ts::zoo
