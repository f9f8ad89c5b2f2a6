// Tests for vision_more.cc (see README.md).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "workers/zoo/model.h"
#include "workers/zoo/nn.h"

namespace ts::zoo {
namespace {

std::unique_ptr<Model> Build(const std::string& arch) {
  auto cfg = ExampleConfig(arch);
  EXPECT_TRUE(cfg.ok()) << arch;
  auto m = BuildModel(*cfg, BuildOptions());
  EXPECT_TRUE(m.ok()) << arch << ": " << m.status().ToString();
  return std::move(*m);
}

std::vector<int64_t> Shape(const Model& m, const std::string& name) {
  for (const auto& [n, s] : m.WeightShapes()) {
    if (n == name) return s;
  }
  return {};
}

// Forward shapes, determinism, fp64 vs fp32 agreement and a finite loss with gradients.
void CheckCommon(const std::string& arch, std::vector<int64_t> out_shape) {
  SCOPED_TRACE(arch);
  auto m = Build(arch);
  ASSERT_TRUE(m);
  auto w = m->InitWeights(3);
  auto batch = m->MakeBatch(3, 2);
  auto out = m->Forward(w, batch.inputs);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].sizes().vec(), out_shape);
  EXPECT_TRUE(at::isfinite(out[0]).all().item<bool>());
  EXPECT_TRUE(at::equal(out[0], m->Forward(w, batch.inputs)[0]));
  WeightMap w64;
  for (const auto& [k, v] : w) w64[k] = v.to(at::kDouble);
  TensorMap in64;
  for (const auto& [k, v] : batch.inputs) in64[k] = at::isFloatingType(v.scalar_type()) ? v.to(at::kDouble) : v;
  at::Tensor o64 = m->Forward(w64, in64)[0];
  EXPECT_EQ(o64.scalar_type(), at::kDouble);
  const double scale = out[0].abs().max().item<double>() + 1e-6;
  EXPECT_LT((o64.to(at::kFloat) - out[0]).abs().max().item<double>() / scale, 1e-4);
  for (auto& [k, v] : w) v.requires_grad_(true);
  at::Tensor loss = m->Loss(w, batch);
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  loss.backward();
  // Under emulation the model still runs (grouped convs round too).
  {
    at::NoGradGuard ng;
    ScopedBf16MatmulEmulation emu;
    at::Tensor e = m->Forward(w, batch.inputs)[0];
    EXPECT_TRUE(at::isfinite(e).all().item<bool>());
  }
}

TEST(VisionMoreTest, DeiT) {
  CheckCommon("DeiTForImageClassification", {2, 10});
  CheckCommon("DeiTForImageClassificationWithTeacher", {2, 10});
  CheckCommon("DeiTModel", {2, 18, 64});
  auto m = Build("DeiTForImageClassificationWithTeacher");
  EXPECT_EQ(Shape(*m, "deit.embeddings.distillation_token"), (std::vector<int64_t>{1, 1, 64}));
  EXPECT_EQ(Shape(*m, "deit.embeddings.position_embeddings"), (std::vector<int64_t>{1, 18, 64}));
}

TEST(VisionMoreTest, ResNet) {
  CheckCommon("ResNetForImageClassification", {2, 10});
  CheckCommon("ResNetModel", {2, 128, 1, 1});
  auto m = Build("ResNetForImageClassification");
  // Bottleneck kept: 1x1 reduce, 3x3, 1x1 expand; 4 stages.
  EXPECT_EQ(Shape(*m, "resnet.encoder.stages.3.layers.0.layer.1.convolution.weight"),
            (std::vector<int64_t>{32, 32, 3, 3}));
  EXPECT_FALSE(Shape(*m, "resnet.encoder.stages.0.layers.0.shortcut.normalization.running_var").empty());
}

TEST(VisionMoreTest, ConvNext) {
  CheckCommon("ConvNextForImageClassification", {2, 10});
  CheckCommon("ConvNextModel", {2, 64, 1, 1});
  auto m = Build("ConvNextForImageClassification");
  // Depthwise 7x7: groups == channels (weight [C, 1, 7, 7]).
  EXPECT_EQ(Shape(*m, "convnext.encoder.stages.1.layers.0.dwconv.weight"),
            (std::vector<int64_t>{16, 1, 7, 7}));
  EXPECT_EQ(Shape(*m, "convnext.encoder.stages.1.layers.0.layer_scale_parameter"),
            (std::vector<int64_t>{16}));
}

TEST(VisionMoreTest, MobileNetV2AndEfficientNet) {
  CheckCommon("MobileNetV2ForImageClassification", {2, 10});
  CheckCommon("MobileNetV2Model", {2, 1280, 1, 1});
  CheckCommon("EfficientNetForImageClassification", {2, 10});
  CheckCommon("EfficientNetModel", {2, 320, 1, 1});
  auto m = Build("MobileNetV2ForImageClassification");
  // Inverted residual: depthwise 3x3 over the expanded channels (groups == channels).
  EXPECT_EQ(Shape(*m, "mobilenet_v2.layer.0.conv_3x3.convolution.weight"),
            (std::vector<int64_t>{48, 1, 3, 3}));
  auto e = Build("EfficientNetForImageClassification");
  // All seven stages kept (one block each), squeeze-excite at ratio 0.25 of the block input.
  EXPECT_FALSE(Shape(*e, "efficientnet.encoder.blocks.6.depthwise_conv.depthwise_conv.weight").empty());
  EXPECT_TRUE(Shape(*e, "efficientnet.encoder.blocks.7.depthwise_conv.depthwise_conv.weight").empty());
  EXPECT_EQ(Shape(*e, "efficientnet.encoder.blocks.1.squeeze_excite.reduce.weight"),
            (std::vector<int64_t>{2, 48, 1, 1}));
}

TEST(VisionMoreTest, Swin) {
  CheckCommon("SwinForImageClassification", {2, 10});
  CheckCommon("SwinModel", {2, 16, 64});
  auto m = Build("SwinForImageClassification");
  EXPECT_EQ(Shape(*m, "swin.encoder.layers.0.blocks.1.attention.self.relative_position_bias_table"),
            (std::vector<int64_t>{49, 2}));
  EXPECT_EQ(Shape(*m, "swin.encoder.layers.0.downsample.reduction.weight"),
            (std::vector<int64_t>{64, 128}));
}

TEST(VisionMoreTest, BadConfigsNameTheField) {
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

}  // namespace
}  // namespace ts::zoo
