// MobileNetV1 (modeling_mobilenet_v1.py): MobileNetV1Model, MobileNetV1ForImageClassification.
// A 3x3 / 2 conv stem, then 13 depthwise-separable blocks (layer.2i: depthwise 3x3, stride from
// [1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1]; layer.2i+1: pointwise 1x1), every conv bias-free and
// followed by BatchNorm (layer_norm_eps) and hidden_act (relu6); channels max(int(depth *
// depth_multiplier), min_depth) with depth 32 doubled at block 0 and each stride 2; TensorFlow
// "same" padding when tf_padding. The pooler averages the last map; the classifier reads it.
#include <algorithm>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_conv.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct MobileNetV1Config {
  int64_t num_channels = 3, image_size = 224, min_depth = 8;
  double depth_multiplier = 1.0, layer_norm_eps = 1e-3;
  bool tf_padding = true;
  VisionActivation act;
  int64_t num_labels = 2;
};

StatusOr<MobileNetV1Config> ParseMobileNetV1(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  MobileNetV1Config c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.depth_multiplier, r.Double("depth_multiplier", 1.0));
  if (!(c.depth_multiplier > 0)) return r.Error("depth_multiplier", "must be positive");
  TS_ASSIGN_OR_RETURN(c.min_depth, PositiveInt(r, "min_depth", 8));
  TS_ASSIGN_OR_RETURN(c.tf_padding, r.Bool("tf_padding", true));
  TS_ASSIGN_OR_RETURN(c.layer_norm_eps, r.Double("layer_norm_eps", 1e-3));
  if (!(c.layer_norm_eps > 0)) return r.Error("layer_norm_eps", "must be positive");
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "relu6"));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleMobileNetV1(const json& config) {
  TS_ASSIGN_OR_RETURN(MobileNetV1Config c, ParseMobileNetV1(config));
  json t = config;
  t["depth_multiplier"] = std::min(c.depth_multiplier, 0.25);
  t["image_size"] = TinyProfile::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

ConvTrunkRecipe MobileNetV1Recipe(const MobileNetV1Config& c, const std::string& pre) {
  auto width = [&](int64_t depth) {
    return std::max<int64_t>(static_cast<int64_t>(static_cast<double>(depth) * c.depth_multiplier),
                             c.min_depth);
  };
  auto layer = [&](const std::string& p, int64_t in, int64_t out, int64_t k, int64_t s,
                   int64_t g) {
    return MakeMobileNetConvBn(p, in, out, k, s, g, /*act=*/true, c.tf_padding);
  };
  ConvTrunkRecipe r;
  r.channels = c.num_channels;
  r.image_size = c.image_size;
  r.act = c.act;
  r.bn_eps = c.layer_norm_eps;
  int64_t depth = 32;
  int64_t out = width(depth);
  r.stem.push_back(layer(pre + "conv_stem.", c.num_channels, out, 3, 2, 1));
  const int64_t strides[] = {1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1};
  for (int64_t i = 0; i < 13; ++i) {
    const int64_t in = out;
    if (strides[i] == 2 || i == 0) {
      depth *= 2;
      out = width(depth);
    }
    ConvBlock b;
    b.layers.push_back(
        layer(pre + "layer." + std::to_string(2 * i) + ".", in, in, 3, strides[i], in));
    b.layers.push_back(layer(pre + "layer." + std::to_string(2 * i + 1) + ".", in, out, 1, 1, 1));
    r.blocks.push_back(std::move(b));
  }
  r.out_channels = out;
  r.out_hw = (c.image_size + 31) / 32;
  return r;
}

StatusOr<PooledVisionTrunk> MobileNetV1Trunk(const json& config, const std::string& prefix) {
  TS_ASSIGN_OR_RETURN(MobileNetV1Config c, ParseMobileNetV1(config));
  return PooledVisionTrunk{std::make_unique<ConvTrunk>(MobileNetV1Recipe(c, prefix)), c.num_labels};
}

}  // namespace

std::vector<ArchEntry> MobileNetV1Archs() {
  // google/mobilenet_v1_1.0_224 (1001 labels: 0 is background).
  const json mnv1 = {{"model_type", "mobilenet_v1"},
                     {"num_channels", 3},
                     {"image_size", 224},
                     {"depth_multiplier", 1.0},
                     {"min_depth", 8},
                     {"hidden_act", "relu6"},
                     {"tf_padding", true},
                     {"classifier_dropout_prob", 0.999},
                     {"layer_norm_eps", 0.001},
                     {"initializer_range", 0.02},
                     {"num_labels", 1001}};
  return PooledVisionArchs({"MobileNetV1", "mobilenet_v1", "mobilenet_v1."}, mnv1,
                           ScaleMobileNetV1, MobileNetV1Trunk);
}

TS_ZOO_REGISTER_FAMILY(MobileNetV1, MobileNetV1Archs);

}  // namespace ts::zoo::internal
