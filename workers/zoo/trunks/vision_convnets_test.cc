// Convolutional vision families against references written in double from transformers'
// sources (not from the zoo's trunks): BiT (modeling_bit.py: WeightStandardizedConv2d,
// DynamicPad2d, BitGroupNormActivation, BitMaxPool2d, the preactivation and bottleneck layers).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"
#include "workers/zoo/trunks/vision_formula_test_util.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;
using testing::Ran;
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

}  // namespace
}  // namespace ts::zoo
