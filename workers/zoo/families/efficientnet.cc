// EfficientNet: EfficientNetModel, EfficientNetForImageClassification. Config -> conv trunk
// recipe (trunks/vision_conv.h: MBConv blocks with squeeze-excite) and the example config.
#include <algorithm>
#include <cmath>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_conv.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct EfficientNetConfig {
  int64_t num_channels = 3, image_size = 600, hidden_dim = 2560, depth_divisor = 8;
  double width_coefficient = 2.0, depth_coefficient = 3.1, se_ratio = 0.25, bn_eps = 1e-3;
  std::vector<int64_t> kernel_sizes, in_channels, out_channels, strides, repeats, expand_ratios,
      depthwise_padding;
  VisionActivation act;
  int64_t num_labels = 2;
  int64_t RoundFilters(int64_t ch) const {
    const double v = static_cast<double>(ch) * width_coefficient;
    int64_t d = std::max<int64_t>(
        depth_divisor, static_cast<int64_t>(v + static_cast<double>(depth_divisor) / 2.0) /
                           depth_divisor * depth_divisor);
    if (static_cast<double>(d) < 0.9 * v) d += depth_divisor;
    return d;
  }
  int64_t RoundRepeats(int64_t r) const {
    return static_cast<int64_t>(std::ceil(depth_coefficient * static_cast<double>(r)));
  }
};

StatusOr<EfficientNetConfig> ParseEfficientNet(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  EfficientNetConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 600));
  TS_ASSIGN_OR_RETURN(c.width_coefficient, r.Double("width_coefficient", 2.0));
  if (c.width_coefficient <= 0) return r.Error("width_coefficient", "must be positive");
  TS_ASSIGN_OR_RETURN(c.depth_coefficient, r.Double("depth_coefficient", 3.1));
  if (c.depth_coefficient <= 0) return r.Error("depth_coefficient", "must be positive");
  TS_ASSIGN_OR_RETURN(c.depth_divisor, PositiveInt(r, "depth_divisor", 8));
  TS_ASSIGN_OR_RETURN(c.kernel_sizes, IntList(config, "kernel_sizes", {3, 3, 5, 3, 5, 5, 3}));
  TS_ASSIGN_OR_RETURN(c.in_channels,
                      IntList(config, "in_channels", {32, 16, 24, 40, 80, 112, 192}));
  TS_ASSIGN_OR_RETURN(c.out_channels,
                      IntList(config, "out_channels", {16, 24, 40, 80, 112, 192, 320}));
  TS_ASSIGN_OR_RETURN(c.strides, IntList(config, "strides", {1, 2, 2, 2, 1, 2, 1}));
  TS_ASSIGN_OR_RETURN(c.repeats, IntList(config, "num_block_repeats", {1, 2, 2, 3, 3, 4, 1}));
  TS_ASSIGN_OR_RETURN(c.expand_ratios, IntList(config, "expand_ratios", {1, 6, 6, 6, 6, 6, 6}));
  TS_ASSIGN_OR_RETURN(c.depthwise_padding, IntList(config, "depthwise_padding", {}));
  const size_t n = c.in_channels.size();
  if (n == 0) return InvalidArgumentError("in_channels: must not be empty");
  for (const auto& [name, v] : std::vector<std::pair<std::string, const std::vector<int64_t>*>>{
           {"kernel_sizes", &c.kernel_sizes},
           {"in_channels", &c.in_channels},
           {"out_channels", &c.out_channels},
           {"strides", &c.strides},
           {"num_block_repeats", &c.repeats},
           {"expand_ratios", &c.expand_ratios}}) {
    TS_RETURN_IF_ERROR(CheckLen(name, *v, n));
    TS_RETURN_IF_ERROR(CheckAllPositive(name, *v));
  }
  for (int64_t k : c.kernel_sizes) {
    if (k % 2 == 0)
      return InvalidArgumentError("kernel_sizes: must be odd, got " + std::to_string(k));
  }
  for (int64_t s : c.strides) {
    if (s > 2) return InvalidArgumentError("strides: must be 1 or 2, got " + std::to_string(s));
  }
  TS_ASSIGN_OR_RETURN(c.se_ratio, r.Double("squeeze_expansion_ratio", 0.25));
  TS_ASSIGN_OR_RETURN(c.bn_eps, r.Double("batch_norm_eps", 1e-3));
  TS_ASSIGN_OR_RETURN(c.hidden_dim, PositiveInt(r, "hidden_dim", 2560));
  if (c.hidden_dim != c.RoundFilters(1280)) {
    return r.Error("hidden_dim",
                   "must equal round_filters(1280) = " + std::to_string(c.RoundFilters(1280)) +
                       ", got " + std::to_string(c.hidden_dim));
  }
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "swish"));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleEfficientNet(const json& config) {
  TS_ASSIGN_OR_RETURN(EfficientNetConfig c, ParseEfficientNet(config));
  json t = config;
  const int64_t max_rep = *std::max_element(c.repeats.begin(), c.repeats.end());
  c.width_coefficient = std::min(c.width_coefficient, 0.25);
  c.depth_coefficient = std::min(c.depth_coefficient, 1.0 / static_cast<double>(max_rep));
  t["width_coefficient"] = c.width_coefficient;
  t["depth_coefficient"] = c.depth_coefficient;
  t["hidden_dim"] = c.RoundFilters(1280);
  t["image_size"] = TinyProfile::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

// One MBConv block: optional 1x1 expansion, depthwise k x k, squeeze-excite, 1x1 projection.
ConvBlock MbConvBlock(const EfficientNetConfig& c, const std::string& bp, int64_t block_num,
                      size_t stage, int64_t in, int64_t out, int64_t stride) {
  const int64_t k = c.kernel_sizes[stage];
  const int64_t ratio = c.expand_ratios[stage];
  const int64_t e = in * ratio;
  ConvBlock b;
  if (ratio != 1) {
    b.layers.push_back(
        MakeConvBn(bp + "expansion.", "expand_conv", "expand_bn", in, e, 1, 1, 1, true));
  }
  ConvBnLayer dw = MakeConvBn(bp + "depthwise_conv.", "depthwise_conv", "depthwise_norm", e, e, k,
                              stride, e, true);
  if (stride == 2) {
    const bool adjust = std::find(c.depthwise_padding.begin(), c.depthwise_padding.end(),
                                  block_num) == c.depthwise_padding.end();
    const int64_t h = k / 2;
    dw.pad = ConvBnLayer::Pad::kExplicit;
    dw.explicit_pad =
        adjust ? std::vector<int64_t>{h - 1, h, h - 1, h} : std::vector<int64_t>{h, h, h, h};
  }
  b.layers.push_back(std::move(dw));
  b.se = bp + "squeeze_excite.";
  b.se_width = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(in) * c.se_ratio));
  b.layers.push_back(
      MakeConvBn(bp + "projection.", "project_conv", "project_bn", e, out, 1, 1, 1, false));
  return b;
}

ConvTrunkRecipe EfficientNetRecipe(const EfficientNetConfig& c, const std::string& pre) {
  ConvTrunkRecipe r;
  r.channels = c.num_channels;
  r.image_size = c.image_size;
  r.act = c.act;
  r.bn_eps = c.bn_eps;
  ConvBnLayer stem = MakeConvBn(pre + "embeddings.", "convolution", "batchnorm", c.num_channels,
                                c.RoundFilters(32), 3, 2, 1, true);
  stem.pad = ConvBnLayer::Pad::kExplicit;
  stem.explicit_pad = {0, 1, 0, 1};
  r.stem.push_back(std::move(stem));
  int64_t hw = c.image_size / 2;
  int64_t block_num = 0;
  for (size_t i = 0; i < c.in_channels.size(); ++i) {
    const int64_t out = c.RoundFilters(c.out_channels[i]);
    for (int64_t j = 0; j < c.RoundRepeats(c.repeats[i]); ++j, ++block_num) {
      const int64_t in = j == 0 ? c.RoundFilters(c.in_channels[i]) : out;
      const int64_t stride = j == 0 ? c.strides[i] : 1;
      const std::string bp = pre + "encoder.blocks." + std::to_string(block_num) + ".";
      ConvBlock b = MbConvBlock(c, bp, block_num, i, in, out, stride);
      if (stride == 2) hw = (hw + 1) / 2;
      if (stride == 1 && j != 0) b.residual = ConvBlock::Residual::kBranchPlusInput;
      r.blocks.push_back(std::move(b));
    }
  }
  const int64_t last = c.RoundFilters(c.out_channels.back());
  r.top =
      MakeConvBn(pre + "encoder.", "top_conv", "top_bn", last, c.RoundFilters(1280), 1, 1, 1, true);
  r.out_channels = c.RoundFilters(1280);
  r.out_hw = hw;
  return r;
}

StatusOr<PooledVisionTrunk> EfficientNetTrunk(const json& config, const std::string& prefix) {
  TS_ASSIGN_OR_RETURN(EfficientNetConfig c, ParseEfficientNet(config));
  return PooledVisionTrunk{std::make_unique<ConvTrunk>(EfficientNetRecipe(c, prefix)),
                           c.num_labels};
}

}  // namespace

std::vector<ArchEntry> EfficientNetArchs() {
  // Modelled on google/efficientnet-b0.
  const json effnet = {{"model_type", "efficientnet"},
                       {"num_channels", 3},
                       {"image_size", 224},
                       {"width_coefficient", 1.0},
                       {"depth_coefficient", 1.0},
                       {"depth_divisor", 8},
                       {"kernel_sizes", {3, 3, 5, 3, 5, 5, 3}},
                       {"in_channels", {32, 16, 24, 40, 80, 112, 192}},
                       {"out_channels", {16, 24, 40, 80, 112, 192, 320}},
                       {"depthwise_padding", json::array()},
                       {"strides", {1, 2, 2, 2, 1, 2, 1}},
                       {"num_block_repeats", {1, 2, 2, 3, 3, 4, 1}},
                       {"expand_ratios", {1, 6, 6, 6, 6, 6, 6}},
                       {"squeeze_expansion_ratio", 0.25},
                       {"hidden_act", "swish"},
                       {"hidden_dim", 1280},
                       {"pooling_type", "mean"},
                       {"dropout_rate", 0.2},
                       {"batch_norm_eps", 0.001},
                       {"batch_norm_momentum", 0.99},
                       {"num_labels", 1000}};
  return PooledVisionArchs({"EfficientNet", "efficientnet", "efficientnet."}, effnet,
                           ScaleEfficientNet, EfficientNetTrunk);
}

TS_ZOO_REGISTER_FAMILY(EfficientNet, EfficientNetArchs);

}  // namespace ts::zoo::internal
