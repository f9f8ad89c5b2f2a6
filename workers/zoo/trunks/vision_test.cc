// Tests of the vision kind (trunks/vision*.h, heads/image_head.h, families/{deit,resnet,convnext,
// mobilenet_v2,efficientnet,swin}.cc; ViT is in model_test.cc).
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/vision_conv.h"
#include "workers/zoo/trunks/vision_transformer.h"

namespace ts::zoo {
namespace {

using testing::Build;
using testing::CheckClass;

TEST(VisionFamiliesTest, DeiT) {
  CheckClass("DeiTForImageClassification", {2, 10});
  CheckClass("DeiTForImageClassificationWithTeacher", {2, 10});
  CheckClass("DeiTModel", {2, 18, 64});
  auto m = Build("DeiTForImageClassificationWithTeacher");
  EXPECT_EQ(testing::WeightShape(*m, "deit.embeddings.distillation_token"),
            (std::vector<int64_t>{1, 1, 64}));
  EXPECT_EQ(testing::WeightShape(*m, "deit.embeddings.position_embeddings"),
            (std::vector<int64_t>{1, 18, 64}));
}

TEST(VisionFamiliesTest, ResNet) {
  CheckClass("ResNetForImageClassification", {2, 10});
  CheckClass("ResNetModel", {2, 128, 1, 1});
  auto m = Build("ResNetForImageClassification");
  // Bottleneck kept: 1x1 reduce, 3x3, 1x1 expand; 4 stages.
  EXPECT_EQ(testing::WeightShape(*m, "resnet.encoder.stages.3.layers.0.layer.1.convolution.weight"),
            (std::vector<int64_t>{32, 32, 3, 3}));
  EXPECT_FALSE(testing::WeightShape(
                   *m, "resnet.encoder.stages.0.layers.0.shortcut.normalization.running_var")
                   .empty());
}

// ResNetBackbone.forward (modeling_resnet.py): the embedder, the encoder with
// output_hidden_states, feature_maps = hidden_states at out_features' indices (stage_names
// "stem", "stage1".."stage4"); the default last stage is the encoder's output, which is
// ResNetModel's last_hidden_state (cross-checked against transformers, FIDELITY.md) over the
// same state_dict names.
TEST(VisionFamiliesTest, ResNetBackboneIsTheLastStageMapOfResNetModel) {
  auto bb = Build("ResNetBackbone");
  ASSERT_TRUE(bb);
  EXPECT_EQ(bb->spec().task, "backbone");
  auto model = testing::BuildSibling(*bb, "ResNetModel");
  ASSERT_TRUE(model);
  EXPECT_EQ(bb->WeightShapes(), model->WeightShapes());
  const WeightMap w = bb->InitWeights(3, at::kDouble);
  Batch batch = bb->MakeBatch(4, 2);
  batch.inputs["pixel_values"] = batch.inputs.at("pixel_values").to(at::kDouble);
  const auto out = bb->Forward(w, batch.inputs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, 128, 1, 1}));
  EXPECT_EQ(testing::MaxAbs(out[0], model->Forward(w, batch.inputs)[0]), 0.0);
  // No loss in transformers: the map regressed onto the batch's target.
  const at::Tensor target = batch.labels.at("target").to(at::kDouble);
  EXPECT_EQ(target.sizes(), out[0].sizes());
  EXPECT_NEAR(bb->Loss(w, batch).item<double>(), (out[0] - target).pow(2).mean().item<double>(),
              1e-12);
  testing::ExpectConfigError("ResNetBackbone", "out_features", nlohmann::json{"stage2"},
                             "out_features");
  testing::ExpectConfigError("ResNetBackbone", "out_indices", nlohmann::json{1, 4},
                             "out_indices");
}

// ConvNextBackbone.forward (modeling_convnext.py; ConvNextV2Backbone the same): embeddings,
// the encoder with output_hidden_states, feature_maps = hidden_states_norms[stage](hidden
// state) for the stages in out_features (default: the last); ConvNextLayerNorm channels_first:
// u = mean_C(x), s = mean_C((x - u)^2), (x - u) / sqrt(s + 1e-6), then weight[:, None, None] * x
// + bias[:, None, None]. The last stage's hidden state is ConvNextModel's last_hidden_state
// (cross-checked against transformers, FIDELITY.md); the backbone has no final `layernorm`.
TEST(VisionFamiliesTest, ConvNextBackbonesNormTheLastStageOfTheirModel) {
  for (const std::string family : {"ConvNext", "ConvNextV2"}) {
    SCOPED_TRACE(family);
    auto bb = Build(family + "Backbone");
    ASSERT_TRUE(bb);
    EXPECT_EQ(bb->spec().task, "backbone");
    auto model = testing::BuildSibling(*bb, family + "Model");
    ASSERT_TRUE(model);
    EXPECT_TRUE(testing::HasWeight(*model, "layernorm.weight"));
    EXPECT_FALSE(testing::HasWeight(*bb, "layernorm.weight"));
    EXPECT_EQ(testing::WeightShape(*bb, "hidden_states_norms.stage4.weight"),
              (std::vector<int64_t>{64}));
    const WeightMap w = bb->InitWeights(3, at::kDouble);
    WeightMap mw = model->InitWeights(5, at::kDouble);
    for (const auto& [n, t] : w) {
      if (mw.count(n)) mw[n] = t;
    }
    EXPECT_EQ(mw.size(), w.size());  // the model's own: layernorm; the backbone's: the stage norm
    Batch batch = bb->MakeBatch(4, 2);
    batch.inputs["pixel_values"] = batch.inputs.at("pixel_values").to(at::kDouble);
    const at::Tensor x = model->Forward(mw, batch.inputs)[0];
    const at::Tensor u = x.mean(1, /*keepdim=*/true);
    const at::Tensor var = (x - u).pow(2).mean(1, /*keepdim=*/true);
    const at::Tensor want =
        w.at("hidden_states_norms.stage4.weight").view({-1, 1, 1}) * ((x - u) / at::sqrt(var + 1e-6)) +
        w.at("hidden_states_norms.stage4.bias").view({-1, 1, 1});
    const auto out = bb->Forward(w, batch.inputs);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].sizes(), x.sizes());
    EXPECT_LT(testing::MaxAbs(out[0], want), 1e-10);
    testing::ExpectConfigError(family + "Backbone", "out_features",
                               nlohmann::json{"stage1", "stage4"}, "out_features");
  }
}

TEST(VisionFamiliesTest, ConvNext) {
  CheckClass("ConvNextForImageClassification", {2, 10});
  CheckClass("ConvNextModel", {2, 64, 1, 1});
  auto m = Build("ConvNextForImageClassification");
  // Depthwise 7x7: groups == channels (weight [C, 1, 7, 7]).
  EXPECT_EQ(testing::WeightShape(*m, "convnext.encoder.stages.1.layers.0.dwconv.weight"),
            (std::vector<int64_t>{16, 1, 7, 7}));
  EXPECT_EQ(testing::WeightShape(*m, "convnext.encoder.stages.1.layers.0.layer_scale_parameter"),
            (std::vector<int64_t>{16}));
}

TEST(VisionFamiliesTest, MobileNetV2AndEfficientNet) {
  CheckClass("MobileNetV2ForImageClassification", {2, 10});
  CheckClass("MobileNetV2Model", {2, 1280, 1, 1});
  CheckClass("EfficientNetForImageClassification", {2, 10});
  CheckClass("EfficientNetModel", {2, 320, 1, 1});
  auto m = Build("MobileNetV2ForImageClassification");
  // Inverted residual: depthwise 3x3 over the expanded channels (groups == channels).
  EXPECT_EQ(testing::WeightShape(*m, "mobilenet_v2.layer.0.conv_3x3.convolution.weight"),
            (std::vector<int64_t>{48, 1, 3, 3}));
  auto e = Build("EfficientNetForImageClassification");
  // All seven stages kept (one block each), squeeze-excite at ratio 0.25 of the block input.
  EXPECT_FALSE(
      testing::WeightShape(*e, "efficientnet.encoder.blocks.6.depthwise_conv.depthwise_conv.weight")
          .empty());
  EXPECT_TRUE(
      testing::WeightShape(*e, "efficientnet.encoder.blocks.7.depthwise_conv.depthwise_conv.weight")
          .empty());
  EXPECT_EQ(testing::WeightShape(*e, "efficientnet.encoder.blocks.1.squeeze_excite.reduce.weight"),
            (std::vector<int64_t>{2, 48, 1, 1}));
}

TEST(VisionFamiliesTest, Swin) {
  CheckClass("SwinForImageClassification", {2, 10});
  CheckClass("SwinModel", {2, 16, 64});
  auto m = Build("SwinForImageClassification");
  const std::string bias_table =
      "swin.encoder.layers.0.blocks.1.attention.relative_position_bias.relative_position_bias_table";
  EXPECT_EQ(testing::WeightShape(*m, bias_table), (std::vector<int64_t>{49, 2}));
  EXPECT_EQ(testing::WeightShape(*m, "swin.encoder.layers.0.downsample.reduction.weight"),
            (std::vector<int64_t>{64, 128}));
}

TEST(VisionFamiliesTest, BadConfigsNameTheField) {
  auto cfg = *ExampleConfig("ResNetForImageClassification");
  cfg["depths"] = {1, 2};
  auto r = BuildModel(cfg, BuildOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("depths"), std::string::npos) << r.status().message();
  cfg = *ExampleConfig("ConvNextForImageClassification");
  cfg["hidden_sizes"] = "wide";
  r = BuildModel(cfg, BuildOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hidden_sizes"), std::string::npos);
  cfg = *ExampleConfig("DeiTForImageClassification");
  cfg.erase("hidden_size");
  r = BuildModel(cfg, BuildOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hidden_size"), std::string::npos);
}

TEST(VisionTrunkTest, ModelListsTrunkWeightsThenHeadWeights) {
  auto m = Build("DeiTForImageClassificationWithTeacher");
  const auto shapes = m->WeightShapes();
  ASSERT_GE(shapes.size(), 5u);
  EXPECT_EQ(shapes.front().first, "deit.embeddings.cls_token");
  EXPECT_EQ(shapes[shapes.size() - 5].first, "deit.layernorm.bias");
  EXPECT_EQ(shapes.back().first, "distillation_classifier.bias");
  EXPECT_EQ(m->OutputNames(),
            (std::vector<std::string>{"logits", "cls_logits", "distillation_logits"}));
  // The logits are the mean of the two heads' logits.
  auto out = m->Forward(m->InitWeights(1), m->MakeBatch(1, 2).inputs);
  EXPECT_TRUE(at::allclose(out[0], (out[1] + out[2]) / 2));
}

TEST(VisionTrunkTest, BaseModelsRegressOntoTheirOwnTargets) {
  // ViTModel keeps BertModel's loss (labels "labels"); the other base models use "target".
  auto vit = Build("ViTModel");
  auto deit = Build("DeiTModel");
  const Batch vb = vit->MakeBatch(4, 2), db = deit->MakeBatch(4, 2);
  ASSERT_EQ(vb.labels.count("labels"), 1u);
  EXPECT_EQ(vb.labels.at("labels").sizes().vec(), (std::vector<int64_t>{2, 17, 64}));
  ASSERT_EQ(db.labels.count("target"), 1u);
  EXPECT_EQ(db.labels.at("target").sizes().vec(), (std::vector<int64_t>{2, 18, 64}));
  // DeiT's loss: mean((last - target)^2) + mean(pooler^2).
  auto w = deit->InitWeights(4);
  auto out = deit->Forward(w, db.inputs);
  const double expected =
      ((out[0] - db.labels.at("target")).pow(2).mean() + out[1].pow(2).mean()).item<double>();
  EXPECT_NEAR(deit->Loss(w, db).item<double>(), expected, 1e-6 * std::abs(expected));
}

TEST(VisionTrunkTest, BatchNormIsEvalModeBatchNorm) {
  WeightMap w;
  w["bn.weight"] = at::rand({3}) + 0.5;
  w["bn.bias"] = at::randn({3});
  w["bn.running_mean"] = at::randn({3});
  w["bn.running_var"] = at::rand({3}) + 0.5;
  at::Tensor x = at::randn({2, 3, 4, 4});
  at::Tensor expected = at::batch_norm(x, w["bn.weight"], w["bn.bias"], w["bn.running_mean"],
                                       w["bn.running_var"], /*training=*/false, 0.1, 1e-5,
                                       /*cudnn_enabled=*/false);
  EXPECT_TRUE(at::allclose(internal::BatchNorm2d(w, "bn.", x, 1e-5), expected, 1e-5, 1e-6));
}

TEST(VisionTrunkTest, ConvTrunkFollowsItsRecipe) {
  // A stem and one block with a projection shortcut and squeeze-excite before its last layer.
  internal::ConvTrunkRecipe r;
  r.channels = 3;
  r.image_size = 8;
  r.stem.push_back(internal::MakeConvBn("stem.", "conv", "bn", 3, 4, 3, 2, 1, true));
  internal::ConvBlock b;
  b.shortcut = internal::MakeConvBn("b.short.", "conv", "bn", 4, 6, 1, 1, 1, false);
  b.layers.push_back(internal::MakeConvBn("b.dw.", "conv", "bn", 4, 4, 3, 1, 4, true));
  b.layers.push_back(internal::MakeConvBn("b.proj.", "conv", "bn", 4, 6, 1, 1, 1, false));
  b.se = "b.se.";
  b.se_width = 2;
  b.residual = internal::ConvBlock::Residual::kActOfBranchPlusInput;
  r.blocks.push_back(b);
  r.act.act = Activation::kRelu;
  r.out_channels = 6;
  r.out_hw = 4;
  internal::ConvTrunk trunk(r);
  std::vector<std::string> names;
  for (const auto& [name, shape] : trunk.Weights()) names.push_back(name);
  const std::vector<std::string> convs = {names[0], names[5], names[10], names[15], names[19]};
  EXPECT_EQ(convs,
            (std::vector<std::string>{"stem.conv.weight", "b.short.conv.weight", "b.dw.conv.weight",
                                      "b.se.reduce.weight", "b.proj.conv.weight"}));
  EXPECT_EQ(trunk.Weights()[10].second, (std::vector<int64_t>{4, 1, 3, 3}));  // depthwise
  EXPECT_EQ(trunk.BatchNormWeights().count("b.dw.bn.weight"), 1u);
  WeightMap w;
  for (const auto& [name, shape] : trunk.Weights()) w[name] = at::randn(shape).abs() + 0.1;
  auto f = trunk.Forward(w, at::randn({2, 3, 8, 8}));
  EXPECT_EQ(f.last_hidden_state.sizes().vec(), (std::vector<int64_t>{2, 6, 4, 4}));
  EXPECT_EQ(f.pooled.sizes().vec(), (std::vector<int64_t>{2, 6}));
  EXPECT_GE(f.last_hidden_state.min().item<double>(), 0.0);  // relu(y + shortcut)
}

TEST(VisionTrunkTest, EncoderListsLayerWeightsInTheNamingOrder) {
  internal::PreLnEncoderRecipe r;
  r.hidden = 8;
  r.intermediate = 16;
  r.layers = 1;
  r.heads = 2;
  r.qkv_bias = false;
  r.naming = internal::VitEncoderNaming();
  using S = internal::EncoderSlot;
  r.naming.order = {S::kKey, S::kValue, S::kQuery, S::kOut, S::kNorm1, S::kFc1, S::kFc2, S::kNorm2};
  internal::WeightList weights;
  internal::PreLnEncoder enc(r, "p.", weights);
  ASSERT_EQ(weights.size(), 13u);  // 3 q/k/v weights without bias, 5 modules with one
  // transformers 5's ViTLayer names.
  EXPECT_EQ(weights[0].first, "p.layers.0.attention.k_proj.weight");
  EXPECT_EQ(weights[3].first, "p.layers.0.attention.o_proj.weight");
  EXPECT_EQ(weights[7].second, (std::vector<int64_t>{16, 8}));  // mlp.fc1
  EXPECT_EQ(weights[12].first, "p.layers.0.layernorm_after.bias");
}

// transformers' ResNetBasicLayer: shortcut(x) + layer(x), then ACT2FN[hidden_act]; its inner
// ResNetConvLayer(in, out, stride) keeps the default activation="relu" and the second has none;
// ResNetEmbeddings' conv uses hidden_act, then MaxPool2d(3, 2, 1)
// (transformers/models/resnet/modeling_resnet.py).
TEST(VisionFamiliesTest, ResNetInnerConvsUseReluWhateverHiddenAct) {
  const nlohmann::json cfg = {{"architectures", {"ResNetModel"}},
                              {"model_type", "resnet"},
                              {"num_channels", 3},
                              {"embedding_size", 4},
                              {"hidden_sizes", {8}},
                              {"depths", {1}},
                              {"layer_type", "basic"},
                              {"hidden_act", "gelu"},
                              {"image_size", 16}};
  BuildOptions o;
  o.tiny = false;
  auto m = BuildModel(cfg, o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const WeightMap w = (*m)->InitWeights(8, at::kDouble);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor px = at::randn({1, 3, 16, 16}, gen, at::TensorOptions().dtype(at::kDouble));
  auto conv_bn = [&](const std::string& p, const at::Tensor& x, int64_t stride, int64_t pad) {
    at::Tensor y = at::conv2d(x, w.at(p + "convolution.weight"), {}, {stride}, {pad});
    auto v = [&](const char* n) { return w.at(p + "normalization." + n).view({1, -1, 1, 1}); };
    return (y - v("running_mean")) / at::sqrt(v("running_var") + 1e-5) * v("weight") + v("bias");
  };
  auto gelu = [](const at::Tensor& x) { return 0.5 * x * (1.0 + at::erf(x / std::sqrt(2.0))); };
  auto forward = [&](bool inner_relu) {
    at::Tensor x = gelu(conv_bn("embedder.embedder.", px, 2, 3));
    x = at::max_pool2d(x, {3}, {2}, {1});
    const std::string lp = "encoder.stages.0.layers.0.";
    at::Tensor h = conv_bn(lp + "layer.0.", x, 1, 1);
    h = inner_relu ? at::relu(h) : gelu(h);
    h = conv_bn(lp + "layer.1.", h, 1, 1);
    return gelu(h + conv_bn(lp + "shortcut.", x, 1, 0));
  };
  const at::Tensor want = forward(true);
  ASSERT_GT((want - forward(false)).abs().max().item<double>(), 1e-4);
  const at::Tensor got = (*m)->Forward(w, {{"pixel_values", px}})[0];
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-10);
}

// modeling_convnextv2.py: ConvNextV2Layer is dwconv 7x7, LayerNorm (1e-6), pwconv1, act,
// ConvNextV2GRN, pwconv2, residual, with no layer scale; GRN(x) = weight * (x * N) + bias + x,
// N = ||x||_{H,W} / (mean_C ||x||_{H,W} + 1e-6). The embeddings: patchify conv, channel
// LayerNorm (1e-6). One stage, one layer, computed here from those formulas in double.
TEST(VisionFamiliesTest, ConvNextV2GlobalResponseNormAsTransformers) {
  const nlohmann::json cfg = {{"architectures", {"ConvNextV2Model"}}, {"model_type", "convnextv2"},
                              {"num_channels", 3}, {"patch_size", 4}, {"num_stages", 1},
                              {"hidden_sizes", {8}}, {"depths", {1}}, {"image_size", 16},
                              {"hidden_act", "gelu"}, {"layer_norm_eps", 1e-12}};
  auto built = testing::BuildFull(cfg);
  ASSERT_TRUE(built);
  const Model& m = *built;
  EXPECT_EQ(testing::WeightShape(m, "encoder.stages.0.layers.0.grn.weight"),
            (std::vector<int64_t>{1, 1, 1, 32}));
  EXPECT_TRUE(testing::WeightShape(m, "encoder.stages.0.layers.0.layer_scale_parameter").empty());
  const WeightMap w = m.InitWeights(6, at::kDouble);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
  const at::Tensor px = at::randn({2, 3, 16, 16}, gen, at::kDouble);
  const at::Tensor got = m.Forward(w, {{"pixel_values", px}})[0];
  auto wt = [&](const std::string& n) { return w.at(n); };
  auto ln_channels = [&](const at::Tensor& x, const std::string& p) {  // NCHW over C
    return at::layer_norm(x.permute({0, 2, 3, 1}), {x.size(1)}, wt(p + ".weight"),
                          wt(p + ".bias"), 1e-6)
        .permute({0, 3, 1, 2});
  };
  at::Tensor x = at::conv2d(px, wt("embeddings.patch_embeddings.weight"),
                            wt("embeddings.patch_embeddings.bias"), {4, 4});
  x = ln_channels(x, "embeddings.layernorm");
  const std::string l = "encoder.stages.0.layers.0.";
  at::Tensor y = at::conv2d(x, wt(l + "dwconv.weight"), wt(l + "dwconv.bias"), {1, 1}, {3, 3},
                            {1, 1}, 8);
  y = y.permute({0, 2, 3, 1});
  y = at::layer_norm(y, {8}, wt(l + "layernorm.weight"), wt(l + "layernorm.bias"), 1e-6);
  y = at::gelu(at::linear(y, wt(l + "pwconv1.weight"), wt(l + "pwconv1.bias")));
  const at::Tensor g = y.pow(2).sum({1, 2}, /*keepdim=*/true).sqrt();
  const at::Tensor n = g / (g.mean(-1, /*keepdim=*/true) + 1e-6);
  y = wt(l + "grn.weight") * (y * n) + wt(l + "grn.bias") + y;
  y = at::linear(y, wt(l + "pwconv2.weight"), wt(l + "pwconv2.bias")).permute({0, 3, 1, 2});
  EXPECT_LT(testing::RelDiff(got, x + y), 1e-10);
}

// modular_vit_msn.py: ViTMSNModel is ViTModel with `del self.pooler` (last_hidden_state only);
// ViTMSNForImageClassification classifies token 0 of that output, as
// ViTForImageClassification does: on one config and one set of weights, their logits agree.
TEST(VisionFamiliesTest, VitMsnIsViTWithoutPooler) {
  auto msn = Build("ViTMSNForImageClassification");
  ASSERT_TRUE(msn);
  nlohmann::json cfg = msn->spec().tiny_config;
  cfg["model_type"] = "vit";
  auto vit = testing::BuildSibling(*msn, "ViTForImageClassification", cfg);
  ASSERT_TRUE(vit);
  const WeightMap w = msn->InitWeights(2);
  ASSERT_EQ(w.size(), vit->WeightShapes().size());
  const Batch b = msn->MakeBatch(1, 2);
  EXPECT_TRUE(at::equal(msn->Forward(w, b.inputs)[0], vit->Forward(w, b.inputs)[0]));
  auto base = Build("ViTMSNModel");
  ASSERT_TRUE(base);
  EXPECT_EQ(base->OutputNames(), (std::vector<std::string>{"last_hidden_state"}));
  EXPECT_TRUE(testing::WeightShape(*base, "pooler.dense.weight").empty());
  EXPECT_DOUBLE_EQ(base->spec().tiny_config["layer_norm_eps"].get<double>(), 1e-6);
}

// modeling_mobilenet_v1.py, computed here layer by layer: apply_tf_padding (pad_along =
// max(k - (in % s or s), 0), the extra pixel after), conv without bias, BatchNorm (eval,
// layer_norm_eps), relu6; the stem 3x3 / 2, then per block i a depthwise 3x3 (layer.2i, stride
// [1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1][i]) and a pointwise 1x1 (layer.2i+1); channels
// max(int(depth * depth_multiplier), min_depth), depth 32 doubled at block 0 and each stride 2.
TEST(VisionFamiliesTest, MobileNetV1IsTransformersDepthwiseSeparableStack) {
  const nlohmann::json cfg = {{"architectures", {"MobileNetV1Model"}},
                              {"model_type", "mobilenet_v1"}, {"image_size", 32},
                              {"depth_multiplier", 0.25}, {"min_depth", 8},
                              {"layer_norm_eps", 1e-3}, {"hidden_act", "relu6"}};
  auto built = testing::BuildFull(cfg);
  ASSERT_TRUE(built);
  const Model& m = *built;
  EXPECT_EQ(testing::WeightShape(m, "layer.0.convolution.weight"),
            (std::vector<int64_t>{8, 1, 3, 3}));  // depthwise over the stem's max(8, 8)
  EXPECT_EQ(testing::WeightShape(m, "layer.25.convolution.weight"),
            (std::vector<int64_t>{256, 256, 1, 1}));
  EXPECT_TRUE(testing::WeightShape(m, "layer.26.convolution.weight").empty());
  WeightMap w = m.InitWeights(3, at::kDouble);
  for (auto& [k, t] : w)
    if (k.find("running_var") != std::string::npos) t = t.abs() + 0.5;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(2);
  const at::Tensor px = at::randn({1, 3, 32, 32}, gen, at::kDouble);
  auto conv_bn = [&](at::Tensor x, const std::string& p, int64_t k, int64_t s, int64_t groups) {
    auto pad = [&](int64_t in) { return std::max<int64_t>(k - (in % s == 0 ? s : in % s), 0); };
    const int64_t ph = pad(x.size(2)), pw = pad(x.size(3));
    x = at::constant_pad_nd(x, {pw / 2, pw - pw / 2, ph / 2, ph - ph / 2});
    const std::vector<int64_t> stride = {s, s}, none = {0, 0}, one = {1, 1};
    x = at::conv2d(x, w.at(p + "convolution.weight"), at::Tensor(), stride, none, one, groups);
    x = at::batch_norm(x, w.at(p + "normalization.weight"), w.at(p + "normalization.bias"),
                       w.at(p + "normalization.running_mean"),
                       w.at(p + "normalization.running_var"), false, 0.0, 1e-3, false);
    return at::clamp(x, 0.0, 6.0);
  };
  at::Tensor x = conv_bn(px, "conv_stem.", 3, 2, 1);
  const int64_t strides[] = {1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1};
  for (int64_t i = 0; i < 13; ++i) {
    x = conv_bn(x, "layer." + std::to_string(2 * i) + ".", 3, strides[i], x.size(1));
    x = conv_bn(x, "layer." + std::to_string(2 * i + 1) + ".", 1, 1, 1);
  }
  const auto out = m.Forward(w, {{"pixel_values", px}});
  EXPECT_LT(testing::RelDiff(out[0], x), 1e-10);
  EXPECT_LT(testing::RelDiff(out[1], x.mean({2, 3})), 1e-10);
}

}  // namespace
}  // namespace ts::zoo
