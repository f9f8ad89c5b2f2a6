// Convolutional vision families against references written in double from transformers'
// sources (not from the zoo's trunks): BiT (modeling_bit.py: WeightStandardizedConv2d,
// DynamicPad2d, BitGroupNormActivation, BitMaxPool2d, the preactivation and bottleneck layers);
// MobileViT (modeling_mobilevit.py: MobileViTConvLayer, MobileViTInvertedResidual,
// MobileViTLayer's unfolding / folding, MobileViTDeepLabV3); MobileViTV2 (modeling_mobilevitv2.py:
// the linear self-attention, GroupNorm(1) layer norms, F.unfold / F.fold); SwiftFormer
// (modeling_swiftformer.py: the conv encoders, the efficient additive attention, the
// distillation-averaged classifier); TextNet (modeling_textnet.py: the stem and the
// TextNetRepConvLayer branches). LeViT and HGNetV2: vision_levit_hgnet_test.cc.
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

// DynamicPad2d(k, stride, dilation 1).
at::Tensor RefDynamicPad(const at::Tensor& x, int64_t k, int64_t s) {
  auto pad = [&](int64_t n) { return std::max<int64_t>(((n + s - 1) / s - 1) * s + k - n, 0); };
  const int64_t ph = pad(x.size(2)), pw = pad(x.size(3));
  return at::constant_pad_nd(x, {pw / 2, pw - pw / 2, ph / 2, ph - ph / 2}, 0);
}

// WeightStandardizedConv2d (eps 1e-8, bias-free) with get_padding_value's padding rule.
at::Tensor RefWsConv(const WeightMap& w, const std::string& name, const at::Tensor& x,
                     int64_t stride, bool same) {
  const at::Tensor& weight = w.at(name);
  const int64_t k = weight.size(2);
  at::Tensor std_w = at::batch_norm(weight.reshape({1, weight.size(0), -1}), {}, {}, {}, {},
                                    /*training=*/true, 0.0, 1e-8, false)
                         .reshape_as(weight);
  int64_t pad = ((stride - 1) + (k - 1)) / 2;
  at::Tensor in = x;
  if (same) {
    if (stride == 1 && (k - 1) % 2 == 0) {
      pad = (k - 1) / 2;
    } else {
      pad = 0;
      in = RefDynamicPad(x, k, stride);
    }
  }
  return at::conv2d(in, std_w, {}, stride, pad);
}

// BitGroupNormActivation (relu).
at::Tensor RefGn(const WeightMap& w, const std::string& p, const at::Tensor& x, int64_t groups,
                 bool act = true) {
  at::Tensor y = at::group_norm(x, groups, w.at(p + "weight"), w.at(p + "bias"), 1e-5);
  return act ? at::relu(y) : y;
}

// BitModel's encoder output (before `norm`) for the tiny config `c`.
at::Tensor RefBitEncoder(const WeightMap& w, const std::string& p, const json& c,
                         const at::Tensor& px) {
  const bool preact = c.value("layer_type", "preactivation") == "preactivation";
  const bool same = c.contains("global_padding") && c["global_padding"].is_string();
  const int64_t g = c.at("num_groups");
  at::Tensor x = RefWsConv(w, p + "embedder.convolution.weight", px, 2, same);
  if (!same) x = at::constant_pad_nd(x, {1, 1, 1, 1}, 0);
  if (!preact) x = RefGn(w, p + "embedder.norm.", x, g);
  if (c.value("embedding_dynamic_padding", false)) x = RefDynamicPad(x, 3, 2);
  x = at::max_pool2d(x, {3, 3}, {2, 2});
  const auto depths = c.at("depths").get<std::vector<int64_t>>();
  for (size_t s = 0; s < depths.size(); ++s) {
    for (int64_t l = 0; l < depths[s]; ++l) {
      const std::string lp =
          p + "encoder.stages." + std::to_string(s) + ".layers." + std::to_string(l) + ".";
      const int64_t stride = (l == 0 && s > 0) ? 2 : 1;
      if (preact) {  // BitPreActivationBottleneckLayer
        at::Tensor pre = RefGn(w, lp + "norm1.", x, g);
        at::Tensor shortcut =
            l == 0 ? RefWsConv(w, lp + "downsample.conv.weight", pre, stride, same) : x;
        at::Tensor h = RefWsConv(w, lp + "conv1.weight", pre, 1, same);
        h = RefWsConv(w, lp + "conv2.weight", RefGn(w, lp + "norm2.", h, g), stride, same);
        h = RefWsConv(w, lp + "conv3.weight", RefGn(w, lp + "norm3.", h, g), 1, same);
        x = h + shortcut;
      } else {  // BitBottleneckLayer
        at::Tensor shortcut = x;
        if (l == 0) {
          shortcut = RefGn(w, lp + "downsample.norm.",
                           RefWsConv(w, lp + "downsample.conv.weight", x, stride, same), g, false);
        }
        at::Tensor h = RefGn(w, lp + "norm1.", RefWsConv(w, lp + "conv1.weight", x, 1, same), g);
        h = RefGn(w, lp + "norm2.", RefWsConv(w, lp + "conv2.weight", h, stride, same), g);
        h = RefGn(w, lp + "norm3.", RefWsConv(w, lp + "conv3.weight", h, 1, same), g, false);
        x = at::relu(h + shortcut);
      }
    }
  }
  return x;
}

TEST(BitTest, PreactivationModelAndClassifierAsTransformers) {
  Ran base = RunClass("BitModel");
  ASSERT_TRUE(base.m);
  const json& c = base.m->spec().tiny_config;
  EXPECT_EQ(c.at("depths"), json({2, 2, 2, 2}));
  at::Tensor last =
      RefGn(base.w, "norm.", RefBitEncoder(base.w, "", c, base.pixels), c.at("num_groups"));
  EXPECT_LT(testing::MaxAbs(base.out[0], last), 1e-10);
  EXPECT_LT(testing::MaxAbs(base.out[1], at::adaptive_avg_pool2d(last, {1, 1})), 1e-10);

  Ran r = RunClass("BitForImageClassification");
  ASSERT_TRUE(r.m);
  at::Tensor feats =
      RefGn(r.w, "bit.norm.", RefBitEncoder(r.w, "bit.", c, r.pixels), c.at("num_groups"));
  at::Tensor logits =
      testing::Lin(r.w, "classifier.1", at::adaptive_avg_pool2d(feats, {1, 1}).flatten(1));
  EXPECT_LT(testing::MaxAbs(r.out[0], logits), 1e-10);
  testing::ExpectConfigError("BitModel", "global_padding", "valid", "global_padding");
  testing::ExpectConfigError("BitModel", "output_stride", 16, "output_stride");
  testing::ExpectConfigError("BitModel", "num_groups", 24, "num_groups");
  testing::ExpectConfigError("BitModel", "layer_type", "basic", "layer_type");
}

TEST(BitTest, BottleneckBackboneWithSamePaddingAsTransformers) {
  Ran r = RunClass("BitBackbone");
  ASSERT_TRUE(r.m);
  const json& c = r.m->spec().tiny_config;
  EXPECT_EQ(c.at("layer_type"), "bottleneck");
  at::Tensor map = RefBitEncoder(r.w, "bit.", c, r.pixels);
  EXPECT_LT(testing::MaxAbs(r.out[0], map), 1e-10);
  EXPECT_GT(map.size(2), 0);
  // Built and never read: BitModel's norm only exists for preactivation layers.
  json pre = *ExampleConfig("BitBackbone");
  pre["layer_type"] = "preactivation";
  auto m = testing::Build("BitBackbone", pre);
  ASSERT_TRUE(m);
  bool norm = false;
  for (const auto& e : StateDictShapes(*m)) norm = norm || e.name == "bit.norm.weight";
  EXPECT_TRUE(norm);
  EXPECT_FALSE(testing::HasWeight(*m, "bit.norm.weight"));
}

// MobileViTConvLayer at `p`: conv (dilated, grouped, no bias), BatchNorm, silu / relu / none.
at::Tensor RefMvConv(const WeightMap& w, const std::string& p, const at::Tensor& x, int64_t stride,
                     int64_t groups, int64_t dilation, const char* act) {
  const at::Tensor& k = w.at(p + "convolution.weight");
  const int64_t pad = (k.size(2) - 1) / 2 * dilation;
  at::Tensor y = at::conv2d(x, k, {}, stride, pad, dilation, groups);
  if (w.count(p + "normalization.weight")) {
    const std::string n = p + "normalization.";
    y = at::batch_norm(y, w.at(n + "weight"), w.at(n + "bias"), w.at(n + "running_mean"),
                       w.at(n + "running_var"), false, 0.1, 1e-5, false);
  }
  if (std::string(act) == "silu") return at::silu(y);
  if (std::string(act) == "relu") return at::relu(y);
  return y;
}

at::Tensor RefMvInverted(const WeightMap& w, const std::string& p, const at::Tensor& x,
                         int64_t stride, int64_t dilation) {
  at::Tensor h = RefMvConv(w, p + "expand_1x1.", x, 1, 1, 1, "silu");
  h = RefMvConv(w, p + "conv_3x3.", h, stride, h.size(1), dilation, "silu");
  h = RefMvConv(w, p + "reduce_1x1.", h, 1, 1, 1, "none");
  return stride == 1 && h.sizes().equals(x.sizes()) ? x + h : h;
}

// MobileViTLayer at `p` with `layers` transformer layers (heads, patch size from `c`).
at::Tensor RefMvBlock(const WeightMap& w, const std::string& p, const json& c, const at::Tensor& in,
                      int layers, int64_t dilation) {
  at::Tensor x = RefMvInverted(w, p + "downsampling_layer.", in, dilation == 1 ? 2 : 1,
                               dilation > 1 ? dilation / 2 : 1);
  at::Tensor residual = x;
  x = RefMvConv(w, p + "conv_kxk.", x, 1, 1, 1, "silu");
  x = RefMvConv(w, p + "conv_1x1.", x, 1, 1, 1, "none");
  const int64_t ps = c.at("patch_size"), area = ps * ps, b = x.size(0), ch = x.size(1);
  const int64_t nph = x.size(2) / ps, npw = x.size(3) / ps, n = nph * npw;
  at::Tensor t = x.reshape({b * ch * nph, ps, npw, ps}).transpose(1, 2);
  t = t.reshape({b, ch, n, area}).transpose(1, 3).reshape({b * area, n, -1});
  const int64_t heads = c.at("num_attention_heads"), d = ch / heads;
  for (int j = 0; j < layers; ++j) {
    const std::string l = p + "transformer.layer." + std::to_string(j) + ".";
    at::Tensor y = testing::Ln(w, l + "layernorm_before", t, 1e-5);
    auto split = [&](const at::Tensor& z) {
      return z.view({z.size(0), n, heads, d}).permute({0, 2, 1, 3});
    };
    at::Tensor q = split(testing::Lin(w, l + "attention.attention.query", y));
    at::Tensor k = split(testing::Lin(w, l + "attention.attention.key", y));
    at::Tensor v = split(testing::Lin(w, l + "attention.attention.value", y));
    at::Tensor probs = at::softmax(at::matmul(q, k.transpose(-1, -2)) / std::sqrt(1.0 * d), -1);
    at::Tensor ctx = at::matmul(probs, v).permute({0, 2, 1, 3}).reshape({t.size(0), n, ch});
    t = testing::Lin(w, l + "attention.output.dense", ctx) + t;
    y = at::silu(
        testing::Lin(w, l + "intermediate.dense", testing::Ln(w, l + "layernorm_after", t, 1e-5)));
    t = testing::Lin(w, l + "output.dense", y) + t;
  }
  t = testing::Ln(w, p + "layernorm", t, 1e-5);
  x = t.contiguous().view({b, area, n, -1}).transpose(1, 3);
  x = x.reshape({b * ch * nph, npw, ps, ps}).transpose(1, 2).reshape({b, ch, nph * ps, npw * ps});
  x = RefMvConv(w, p + "conv_projection.", x, 1, 1, 1, "silu");
  return RefMvConv(w, p + "fusion.", at::cat({residual, x}, 1), 1, 1, 1, "silu");
}

// MobileViTModel's encoder output (before conv_1x1_exp).
at::Tensor RefMvEncoder(const WeightMap& w, const std::string& p, const json& c,
                        const at::Tensor& px) {
  const int64_t os = c.at("output_stride");
  at::Tensor x = RefMvConv(w, p + "conv_stem.", px, 2, 1, 1, "silu");
  x = RefMvInverted(w, p + "encoder.layer.0.layer.0.", x, 1, 1);
  for (int i = 0; i < 3; ++i)
    x = RefMvInverted(w, p + "encoder.layer.1.layer." + std::to_string(i) + ".", x, i == 0 ? 2 : 1,
                      1);
  x = RefMvBlock(w, p + "encoder.layer.2.", c, x, 2, 1);
  const int64_t d4 = os == 8 ? 2 : 1, d5 = d4 * (os <= 16 ? 2 : 1);
  x = RefMvBlock(w, p + "encoder.layer.3.", c, x, 4, d4);
  return RefMvBlock(w, p + "encoder.layer.4.", c, x, 3, d5);
}

TEST(MobileVitTest, ModelAndClassifierAsTransformers) {
  Ran base = RunClass("MobileViTModel");
  ASSERT_TRUE(base.m);
  const json& c = base.m->spec().tiny_config;
  at::Tensor last =
      RefMvConv(base.w, "conv_1x1_exp.", RefMvEncoder(base.w, "", c, base.pixels), 1, 1, 1, "silu");
  EXPECT_EQ(last.size(2), 2);
  EXPECT_LT(testing::MaxAbs(base.out[0], last), 1e-10);
  EXPECT_LT(testing::MaxAbs(base.out[1], last.mean({-2, -1})), 1e-10);
  Ran r = RunClass("MobileViTForImageClassification");
  ASSERT_TRUE(r.m);
  at::Tensor feats = RefMvConv(r.w, "mobilevit.conv_1x1_exp.",
                               RefMvEncoder(r.w, "mobilevit.", c, r.pixels), 1, 1, 1, "silu");
  EXPECT_LT(testing::MaxAbs(r.out[0], testing::Lin(r.w, "classifier", feats.mean({-2, -1}))),
            1e-10);
  testing::ExpectConfigError("MobileViTModel", "output_stride", 4, "output_stride");
  testing::ExpectConfigError("MobileViTModel", "neck_hidden_sizes", json({16, 32}),
                             "neck_hidden_sizes");
}

TEST(MobileVitTest, DeepLabV3SegmentationWithDilatedLastBlockAsTransformers) {
  Ran r = RunClass("MobileViTForSemanticSegmentation");
  ASSERT_TRUE(r.m);
  const json& c = r.m->spec().tiny_config;
  EXPECT_EQ(c.at("output_stride"), 16);
  at::Tensor x = RefMvEncoder(r.w, "mobilevit.", c, r.pixels);
  EXPECT_EQ(x.size(2), 4);
  const std::string a = "segmentation_head.aspp.";
  std::vector<at::Tensor> pyramid = {RefMvConv(r.w, a + "convs.0.", x, 1, 1, 1, "relu")};
  const auto rates = c.at("atrous_rates").get<std::vector<int64_t>>();
  for (int i = 0; i < 3; ++i)
    pyramid.push_back(
        RefMvConv(r.w, a + "convs." + std::to_string(i + 1) + ".", x, 1, 1, rates[i], "relu"));
  at::Tensor pooled =
      RefMvConv(r.w, a + "convs.4.conv_1x1.", at::adaptive_avg_pool2d(x, {1, 1}), 1, 1, 1, "relu");
  pyramid.push_back(at::upsample_bilinear2d(pooled, {x.size(2), x.size(3)}, false));
  at::Tensor y = RefMvConv(r.w, a + "project.", at::cat(pyramid, 1), 1, 1, 1, "relu");
  at::Tensor logits = at::conv2d(y, r.w.at("segmentation_head.classifier.convolution.weight"),
                                 r.w.at("segmentation_head.classifier.convolution.bias"));
  EXPECT_LT(testing::MaxAbs(r.out[0], logits), 1e-10);
  auto batch = r.m->MakeBatch(4, 2);
  const at::Tensor& labels = batch.labels.at("labels");
  at::Tensor up = at::upsample_bilinear2d(logits, {labels.size(1), labels.size(2)}, false);
  at::Tensor loss = at::cross_entropy_loss(up, labels, {}, at::Reduction::Mean, 255);
  for (auto& [k, v] : batch.inputs) v = v.to(at::kDouble);
  EXPECT_NEAR(r.m->Loss(r.w, batch).item<double>(), loss.item<double>(), 1e-10);
  testing::ExpectConfigError("MobileViTForSemanticSegmentation", "num_labels", 1, "num_labels");
}

// MobileViTV2ConvLayer at `p` (bias when the weights have one).
at::Tensor RefV2Conv(const WeightMap& w, const std::string& p, const at::Tensor& x, int64_t stride,
                     int64_t groups, bool act) {
  const at::Tensor& k = w.at(p + "convolution.weight");
  const std::string b = p + "convolution.bias";
  at::Tensor y =
      at::conv2d(x, k, w.count(b) ? w.at(b) : at::Tensor(), stride, (k.size(2) - 1) / 2, 1, groups);
  if (w.count(p + "normalization.weight")) {
    const std::string n = p + "normalization.";
    y = at::batch_norm(y, w.at(n + "weight"), w.at(n + "bias"), w.at(n + "running_mean"),
                       w.at(n + "running_var"), false, 0.1, 1e-5, false);
  }
  return act ? at::silu(y) : y;
}

at::Tensor RefV2Block(const WeightMap& w, const std::string& p, const at::Tensor& in, int layers) {
  at::Tensor x = RefMvInverted(w, p + "downsampling_layer.", in, 2, 1);
  x = RefV2Conv(w, p + "conv_kxk.", x, 1, x.size(1), true);
  x = RefV2Conv(w, p + "conv_1x1.", x, 1, 1, false);
  const int64_t b = x.size(0), ch = x.size(1), h = x.size(2), wd = x.size(3);
  at::Tensor t = at::im2col(x, {2, 2}, {1, 1}, {0, 0}, {2, 2}).reshape({b, ch, 4, -1});
  auto gn = [&](const std::string& n, const at::Tensor& z) {
    return at::group_norm(z, 1, w.at(n + "weight"), w.at(n + "bias"), 1e-5);
  };
  for (int j = 0; j < layers; ++j) {
    const std::string l = p + "transformer.layer." + std::to_string(j) + ".";
    at::Tensor qkv =
        RefV2Conv(w, l + "attention.qkv_proj.", gn(l + "layernorm_before.", t), 1, 1, false);
    auto parts = at::split_with_sizes(qkv, {1, ch, ch}, 1);
    at::Tensor ctx = (parts[1] * at::softmax(parts[0], -1)).sum(-1, true);
    t = RefV2Conv(w, l + "attention.out_proj.", at::relu(parts[2]) * ctx.expand_as(parts[2]), 1, 1,
                  false) +
        t;
    at::Tensor y = RefV2Conv(w, l + "ffn.conv1.", gn(l + "layernorm_after.", t), 1, 1, true);
    t = RefV2Conv(w, l + "ffn.conv2.", y, 1, 1, false) + t;
  }
  t = gn(p + "layernorm.", t);
  x = at::col2im(t.reshape({b, ch * 4, -1}), {h, wd}, {2, 2}, {1, 1}, {0, 0}, {2, 2});
  return RefV2Conv(w, p + "conv_projection.", x, 1, 1, false);
}

TEST(MobileVitV2Test, LinearAttentionBlocksModelAndClassifierAsTransformers) {
  Ran r = RunClass("MobileViTV2ForImageClassification");
  ASSERT_TRUE(r.m);
  const json& c = r.m->spec().tiny_config;
  EXPECT_EQ(c.at("width_multiplier"), 0.25);
  const std::string p = "mobilevitv2.";
  at::Tensor x = RefV2Conv(r.w, p + "conv_stem.", r.pixels, 2, 1, true);
  x = RefMvInverted(r.w, p + "encoder.layer.0.layer.0.", x, 1, 1);
  x = RefMvInverted(r.w, p + "encoder.layer.1.layer.0.", x, 2, 1);
  x = RefMvInverted(r.w, p + "encoder.layer.1.layer.1.", x, 1, 1);
  const auto blocks = c.at("n_attn_blocks").get<std::vector<int>>();
  for (int b = 0; b < 3; ++b)
    x = RefV2Block(r.w, p + "encoder.layer." + std::to_string(b + 2) + ".", x, blocks[b]);
  EXPECT_EQ(x.size(1), 128);
  at::Tensor logits = testing::Lin(r.w, "classifier", x.mean({-2, -1}));
  EXPECT_LT(testing::MaxAbs(r.out[0], logits), 1e-10);
  Ran base = RunClass("MobileViTV2Model");
  ASSERT_TRUE(base.m);
  WeightMap unprefixed = testing::Unprefixed(r.w, p);
  auto out = base.m->Forward(unprefixed, {{"pixel_values", r.pixels}});
  EXPECT_LT(testing::MaxAbs(out[0], x), 1e-10);
  testing::ExpectConfigError("MobileViTV2Model", "n_attn_blocks", json({2, 4}), "n_attn_blocks");
  testing::ExpectConfigError("MobileViTV2ForSemanticSegmentation", "num_labels", 1, "num_labels");
}

at::Tensor RefConv(const WeightMap& w, const std::string& p, const at::Tensor& x, int64_t stride,
                   int64_t pad, int64_t groups = 1) {
  return at::conv2d(x, w.at(p + "weight"), w.at(p + "bias"), stride, pad, 1, groups);
}

// SwiftFormerConvEncoder / SwiftFormerLocalRepresentation.
at::Tensor RefSfMixer(const WeightMap& w, const std::string& p, const at::Tensor& in) {
  at::Tensor x = RefBn(w, p + "norm.", RefConv(w, p + "depth_wise_conv.", in, 1, 1, in.size(1)));
  x = RefConv(w, p + "point_wise_conv2.", at::gelu(RefConv(w, p + "point_wise_conv1.", x, 1, 0)), 1,
              0);
  return in + w.at(p + "layer_scale") * x;
}

// SwiftFormerModel's last_hidden_state for the tiny config `c`.
at::Tensor RefSwiftFormer(const WeightMap& w, const std::string& p, const json& c,
                          const at::Tensor& px) {
  const std::string pe = p + "patch_embed.patch_embedding.";
  at::Tensor x = at::relu(RefBn(w, pe + "1.", RefConv(w, pe + "0.", px, 2, 1)));
  x = at::relu(RefBn(w, pe + "4.", RefConv(w, pe + "3.", x, 2, 1)));
  const auto depths = c.at("depths").get<std::vector<int64_t>>();
  int net = 0;
  for (size_t s = 0; s < depths.size(); ++s) {
    const std::string st = p + "encoder.network." + std::to_string(net++) + ".blocks.";
    for (int64_t j = 0; j < depths[s]; ++j) {
      const std::string b = st + std::to_string(j) + ".";
      if (j + 1 < depths[s]) {
        x = RefSfMixer(w, b, x);
        continue;
      }
      x = RefSfMixer(w, b + "local_representation.", x);
      const int64_t bs = x.size(0), ch = x.size(1), h = x.size(2), wd = x.size(3);
      at::Tensor t = x.permute({0, 2, 3, 1}).reshape({bs, h * wd, ch});
      const std::string a = b + "attn.";
      // torch.nn.functional.normalize(x, dim=-1) as torch defines it.
      auto normalize = [](const at::Tensor& z) {
        return z / z.norm(2, {-1}, true).clamp_min(1e-12).expand_as(z);
      };
      at::Tensor q = normalize(testing::Lin(w, a + "to_query", t));
      at::Tensor k = normalize(testing::Lin(w, a + "to_key", t));
      at::Tensor qw = at::softmax(at::matmul(q, w.at(a + "w_g")) * std::pow(ch, -0.5), -1);
      at::Tensor g = (qw * q).sum(1).unsqueeze(1).repeat({1, k.size(1), 1});
      at::Tensor out = testing::Lin(w, a + "final", testing::Lin(w, a + "proj", g * k) + q);
      x = x + w.at(b + "layer_scale_1") * out.reshape({bs, h, wd, ch}).permute({0, 3, 1, 2});
      at::Tensor y =
          at::gelu(RefConv(w, b + "linear.fc1.", RefBn(w, b + "linear.norm1.", x), 1, 0));
      x = x + w.at(b + "layer_scale_2") * RefConv(w, b + "linear.fc2.", y, 1, 0);
    }
    if (s + 1 < depths.size()) {
      const std::string e = p + "encoder.network." + std::to_string(net++) + ".";
      x = RefBn(w, e + "norm.", RefConv(w, e + "proj.", x, 2, 1));
    }
  }
  return x;
}

TEST(SwiftFormerTest, ModelAndDistilledClassifierAsTransformers) {
  Ran base = RunClass("SwiftFormerModel");
  ASSERT_TRUE(base.m);
  const json& c = base.m->spec().tiny_config;
  EXPECT_EQ(c.at("depths"), json({2, 2, 2, 2}));
  at::Tensor last = RefSwiftFormer(base.w, "", c, base.pixels);
  EXPECT_EQ(last.size(2), 2);
  EXPECT_LT(testing::MaxAbs(base.out[0], last), 1e-10);
  Ran r = RunClass("SwiftFormerForImageClassification");
  ASSERT_TRUE(r.m);
  at::Tensor x = RefBn(r.w, "norm.", RefSwiftFormer(r.w, "swiftformer.", c, r.pixels));
  x = x.flatten(2).mean(-1);
  at::Tensor logits = (testing::Lin(r.w, "head", x) + testing::Lin(r.w, "dist_head", x)) / 2;
  EXPECT_LT(testing::MaxAbs(r.out[0], logits), 1e-10);
  testing::ExpectConfigError("SwiftFormerModel", "embed_dims", json({48, 56}), "embed_dims");
}

// TextNetModel's last_hidden_state for the tiny config `c`.
at::Tensor RefTextNet(const WeightMap& w, const std::string& p, const json& c,
                      const at::Tensor& px) {
  const int64_t k = c.at("stem_kernel_size");
  at::Tensor x =
      at::conv2d(px, w.at(p + "stem.conv.weight"), {}, c.at("stem_stride").get<int64_t>(), k / 2);
  x = at::relu(RefBn(w, p + "stem.batch_norm.", x));
  const json& kernels = c.at("conv_layer_kernel_sizes");
  const json& strides = c.at("conv_layer_strides");
  for (size_t s = 0; s < kernels.size(); ++s) {
    for (size_t l = 0; l < kernels[s].size(); ++l) {
      const std::string q =
          p + "encoder.stages." + std::to_string(s) + ".stage." + std::to_string(l) + ".";
      const int64_t kh = kernels[s][l][0], kw = kernels[s][l][1], st = strides[s][l];
      auto branch = [&](const std::string& conv, const std::string& bn, int64_t ph, int64_t pw) {
        return RefBn(w, q + bn + ".", at::conv2d(x, w.at(q + conv + ".weight"), {}, st, {ph, pw}));
      };
      at::Tensor y = branch("main_conv", "main_batch_norm", (kh - 1) / 2, (kw - 1) / 2);
      if (kw != 1) y = y + branch("vertical_conv", "vertical_batch_norm", (kh - 1) / 2, 0);
      if (kh != 1) y = y + branch("horizontal_conv", "horizontal_batch_norm", 0, (kw - 1) / 2);
      if (w.count(q + "rbr_identity.weight")) y = y + RefBn(w, q + "rbr_identity.", x);
      x = at::relu(y);
    }
  }
  return x;
}

TEST(TextNetTest, RepConvBranchesModelClassifierAndBackboneAsTransformers) {
  Ran base = RunClass("TextNetModel");
  ASSERT_TRUE(base.m);
  const json& c = base.m->spec().tiny_config;
  at::Tensor last = RefTextNet(base.w, "", c, base.pixels);
  EXPECT_LT(testing::MaxAbs(base.out[0], last), 1e-10);
  EXPECT_LT(testing::MaxAbs(base.out[1], at::adaptive_avg_pool2d(last, {2, 2})), 1e-10);
  Ran r = RunClass("TextNetForImageClassification");
  ASSERT_TRUE(r.m);
  at::Tensor feats = at::adaptive_avg_pool2d(RefTextNet(r.w, "textnet.", c, r.pixels), {1, 1});
  EXPECT_LT(testing::MaxAbs(r.out[0], testing::Lin(r.w, "fc", feats.flatten(1))), 1e-10);
  Ran b = RunClass("TextNetBackbone");
  ASSERT_TRUE(b.m);
  EXPECT_LT(testing::MaxAbs(b.out[0], RefTextNet(b.w, "textnet.", c, b.pixels)), 1e-10);
  testing::ExpectConfigError("TextNetModel", "conv_layer_kernel_sizes", json({{{2, 3}}}),
                             "conv_layer_kernel_sizes");
  testing::ExpectConfigError("TextNetModel", "hidden_sizes", json({64, 64}), "hidden_sizes");
}

}  // namespace
}  // namespace ts::zoo
