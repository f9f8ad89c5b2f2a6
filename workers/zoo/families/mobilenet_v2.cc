// MobileNetV2: MobileNetV2Model, MobileNetV2ForImageClassification. Config -> conv trunk
// recipe (trunks/vision_conv.h: inverted residual blocks) and the example config.
#include <algorithm>
#include <cmath>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_conv.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

// HF make_divisible.
int64_t MakeDivisible(double value, int64_t divisor, int64_t min_value) {
  int64_t v = std::max<int64_t>(
      min_value,
      static_cast<int64_t>(value + static_cast<double>(divisor) / 2.0) / divisor * divisor);
  if (static_cast<double>(v) < 0.9 * value) v += divisor;
  return v;
}

struct MobileNetV2Config {
  int64_t num_channels = 3, image_size = 224, depth_divisible_by = 8, min_depth = 8;
  double depth_multiplier = 1.0, expand_ratio = 6.0, layer_norm_eps = 1e-3;
  bool first_layer_is_expansion = true, finegrained_output = true, tf_padding = true;
  VisionActivation act;
  int64_t num_labels = 2;
};

StatusOr<MobileNetV2Config> ParseMobileNetV2(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  MobileNetV2Config c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.depth_multiplier, r.Double("depth_multiplier", 1.0));
  if (c.depth_multiplier <= 0) return r.Error("depth_multiplier", "must be positive");
  TS_ASSIGN_OR_RETURN(c.depth_divisible_by, PositiveInt(r, "depth_divisible_by", 8));
  TS_ASSIGN_OR_RETURN(c.min_depth, PositiveInt(r, "min_depth", 8));
  TS_ASSIGN_OR_RETURN(c.expand_ratio, r.Double("expand_ratio", 6.0));
  if (c.expand_ratio <= 0) return r.Error("expand_ratio", "must be positive");
  TS_ASSIGN_OR_RETURN(int64_t output_stride, PositiveInt(r, "output_stride", 32));
  if (output_stride != 32) return r.Error("output_stride", "only 32 is supported (no dilation)");
  TS_ASSIGN_OR_RETURN(c.first_layer_is_expansion, r.Bool("first_layer_is_expansion", true));
  TS_ASSIGN_OR_RETURN(c.finegrained_output, r.Bool("finegrained_output", true));
  TS_ASSIGN_OR_RETURN(c.tf_padding, r.Bool("tf_padding", true));
  TS_ASSIGN_OR_RETURN(c.layer_norm_eps, r.Double("layer_norm_eps", 1e-3));
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "relu6"));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleMobileNetV2(const json& config) {
  TS_ASSIGN_OR_RETURN(MobileNetV2Config c, ParseMobileNetV2(config));
  json t = config;
  t["depth_multiplier"] = std::min(c.depth_multiplier, 0.25);
  t["image_size"] = TinyProfile::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

ConvTrunkRecipe MobileNetV2Recipe(const MobileNetV2Config& c, const std::string& pre) {
  auto mult = [&](double ch) {
    return MakeDivisible(std::round(ch * c.depth_multiplier), c.depth_divisible_by, c.min_depth);
  };
  std::vector<int64_t> ch;
  for (int64_t v : {16, 24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 160, 160, 160, 320}) {
    ch.push_back(mult(static_cast<double>(v)));
  }
  const std::vector<int64_t> strides = {2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1};
  const int64_t expanded = mult(32);
  auto layer = [&](const std::string& p, int64_t in, int64_t out, int64_t k, int64_t s, int64_t g,
                   bool act) {
    return MakeMobileNetConvBn(p, in, out, k, s, g, act, c.tf_padding);
  };
  ConvTrunkRecipe r;
  r.channels = c.num_channels;
  r.image_size = c.image_size;
  r.act = c.act;
  r.bn_eps = c.layer_norm_eps;
  const std::string sp = pre + "conv_stem.";
  r.stem.push_back(layer(sp + "first_conv.", c.num_channels, expanded, 3, 2, 1, true));
  if (!c.first_layer_is_expansion) {
    r.stem.push_back(layer(sp + "expand_1x1.", expanded, expanded, 1, 1, 1, true));
  }
  r.stem.push_back(layer(sp + "conv_3x3.", expanded, expanded, 3, 1, expanded, true));
  r.stem.push_back(layer(sp + "reduce_1x1.", expanded, ch[0], 1, 1, 1, false));
  for (size_t i = 0; i < strides.size(); ++i) {
    const std::string lp = pre + "layer." + std::to_string(i) + ".";
    const int64_t in = ch[i], out = ch[i + 1];
    const int64_t e = MakeDivisible(std::round(static_cast<double>(in) * c.expand_ratio),
                                    c.depth_divisible_by, c.min_depth);
    ConvBlock b;
    if (strides[i] == 1 && in == out) b.residual = ConvBlock::Residual::kInputPlusBranch;
    b.layers.push_back(layer(lp + "expand_1x1.", in, e, 1, 1, 1, true));
    b.layers.push_back(layer(lp + "conv_3x3.", e, e, 3, strides[i], e, true));
    b.layers.push_back(layer(lp + "reduce_1x1.", e, out, 1, 1, 1, false));
    r.blocks.push_back(std::move(b));
  }
  r.out_channels = c.finegrained_output && c.depth_multiplier < 1.0 ? 1280 : mult(1280);
  r.top = layer(pre + "conv_1x1.", ch.back(), r.out_channels, 1, 1, 1, true);
  r.out_hw = (c.image_size + 31) / 32;
  return r;
}

StatusOr<PooledVisionTrunk> MobileNetV2Trunk(const json& config, const std::string& prefix) {
  TS_ASSIGN_OR_RETURN(MobileNetV2Config c, ParseMobileNetV2(config));
  return PooledVisionTrunk{std::make_unique<ConvTrunk>(MobileNetV2Recipe(c, prefix)), c.num_labels};
}

}  // namespace

std::vector<ArchEntry> MobileNetV2Archs() {
  // Modelled on google/mobilenet_v2_1.0_224.
  const json mnv2 = {{"model_type", "mobilenet_v2"},
                     {"num_channels", 3},
                     {"image_size", 224},
                     {"depth_multiplier", 1.0},
                     {"depth_divisible_by", 8},
                     {"min_depth", 8},
                     {"expand_ratio", 6.0},
                     {"output_stride", 32},
                     {"first_layer_is_expansion", true},
                     {"finegrained_output", true},
                     {"hidden_act", "relu6"},
                     {"tf_padding", true},
                     {"classifier_dropout_prob", 0.2},
                     {"layer_norm_eps", 0.001},
                     {"initializer_range", 0.02},
                     {"num_labels", 1001}};
  return PooledVisionArchs({"MobileNetV2", "mobilenet_v2", "mobilenet_v2."}, mnv2, ScaleMobileNetV2,
                           MobileNetV2Trunk);
}

TS_ZOO_REGISTER_FAMILY(MobileNetV2, MobileNetV2Archs);

}  // namespace ts::zoo::internal
