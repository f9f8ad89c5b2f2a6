// Tests for vision_more.cc (see README.md).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "workers/zoo/family_test_util.h"
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


void CheckCommon(const std::string& arch, std::vector<int64_t> out_shape) {
  SCOPED_TRACE(arch);
  testing::CheckFamilyBasics(Build(arch), std::move(out_shape));
}

TEST(VisionMoreTest, DeiT) {
  CheckCommon("DeiTForImageClassification", {2, 10});
  CheckCommon("DeiTForImageClassificationWithTeacher", {2, 10});
  CheckCommon("DeiTModel", {2, 18, 64});
  auto m = Build("DeiTForImageClassificationWithTeacher");
  EXPECT_EQ(testing::WeightShape(*m, "deit.embeddings.distillation_token"), (std::vector<int64_t>{1, 1, 64}));
  EXPECT_EQ(testing::WeightShape(*m, "deit.embeddings.position_embeddings"), (std::vector<int64_t>{1, 18, 64}));
}

TEST(VisionMoreTest, ResNet) {
  CheckCommon("ResNetForImageClassification", {2, 10});
  CheckCommon("ResNetModel", {2, 128, 1, 1});
  auto m = Build("ResNetForImageClassification");
  // Bottleneck kept: 1x1 reduce, 3x3, 1x1 expand; 4 stages.
  EXPECT_EQ(testing::WeightShape(*m, "resnet.encoder.stages.3.layers.0.layer.1.convolution.weight"),
            (std::vector<int64_t>{32, 32, 3, 3}));
  EXPECT_FALSE(testing::WeightShape(*m, "resnet.encoder.stages.0.layers.0.shortcut.normalization.running_var").empty());
}

TEST(VisionMoreTest, ConvNext) {
  CheckCommon("ConvNextForImageClassification", {2, 10});
  CheckCommon("ConvNextModel", {2, 64, 1, 1});
  auto m = Build("ConvNextForImageClassification");
  // Depthwise 7x7: groups == channels (weight [C, 1, 7, 7]).
  EXPECT_EQ(testing::WeightShape(*m, "convnext.encoder.stages.1.layers.0.dwconv.weight"),
            (std::vector<int64_t>{16, 1, 7, 7}));
  EXPECT_EQ(testing::WeightShape(*m, "convnext.encoder.stages.1.layers.0.layer_scale_parameter"),
            (std::vector<int64_t>{16}));
}

TEST(VisionMoreTest, MobileNetV2AndEfficientNet) {
  CheckCommon("MobileNetV2ForImageClassification", {2, 10});
  CheckCommon("MobileNetV2Model", {2, 1280, 1, 1});
  CheckCommon("EfficientNetForImageClassification", {2, 10});
  CheckCommon("EfficientNetModel", {2, 320, 1, 1});
  auto m = Build("MobileNetV2ForImageClassification");
  // Inverted residual: depthwise 3x3 over the expanded channels (groups == channels).
  EXPECT_EQ(testing::WeightShape(*m, "mobilenet_v2.layer.0.conv_3x3.convolution.weight"),
            (std::vector<int64_t>{48, 1, 3, 3}));
  auto e = Build("EfficientNetForImageClassification");
  // All seven stages kept (one block each), squeeze-excite at ratio 0.25 of the block input.
  EXPECT_FALSE(testing::WeightShape(*e, "efficientnet.encoder.blocks.6.depthwise_conv.depthwise_conv.weight").empty());
  EXPECT_TRUE(testing::WeightShape(*e, "efficientnet.encoder.blocks.7.depthwise_conv.depthwise_conv.weight").empty());
  EXPECT_EQ(testing::WeightShape(*e, "efficientnet.encoder.blocks.1.squeeze_excite.reduce.weight"),
            (std::vector<int64_t>{2, 48, 1, 1}));
}

TEST(VisionMoreTest, Swin) {
  CheckCommon("SwinForImageClassification", {2, 10});
  CheckCommon("SwinModel", {2, 16, 64});
  auto m = Build("SwinForImageClassification");
  EXPECT_EQ(testing::WeightShape(*m, "swin.encoder.layers.0.blocks.1.attention.self.relative_position_bias_table"),
            (std::vector<int64_t>{49, 2}));
  EXPECT_EQ(testing::WeightShape(*m, "swin.encoder.layers.0.downsample.reduction.weight"),
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
