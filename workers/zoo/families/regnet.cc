// RegNet (modeling_regnet.py): RegNetModel and RegNetForImageClassification (`regnet.`, the
// classifier `classifier.1` on the flattened pooled map) on the conv trunk
// (trunks/vision_conv.h): the embedder's 3x3 / 2 conv, stages of X or Y layers (a 1x1 conv, a
// grouped 3x3 conv carrying the stride with max(1, out / groups_width) groups, for Y a
// squeeze-excite `layer.2.attention.{1,3}` of round(in / 4) channels with ReLU, a 1x1 conv without
// activation; a projection shortcut when the width or the stride changes; hidden_act after the
// residual sum), average pooling kept [B, C, 1, 1]. Config: num_channels, embedding_size,
// hidden_sizes, depths, groups_width, layer_type ("x" / "y"), hidden_act,
// downsample_in_first_stage.
#include <algorithm>
#include <cmath>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_conv.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct RegNetConfig {
  int64_t num_channels = 3, embedding_size = 32, groups_width = 64;
  std::vector<int64_t> hidden_sizes, depths;
  bool y_layers = true, downsample_in_first_stage = true;
  VisionActivation act;
  int64_t num_labels = 2, image_size = 224;
};

StatusOr<RegNetConfig> ParseRegNet(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  RegNetConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.embedding_size, PositiveInt(r, "embedding_size", 32));
  TS_ASSIGN_OR_RETURN(c.groups_width, PositiveInt(r, "groups_width", 64));
  TS_ASSIGN_OR_RETURN(c.hidden_sizes, IntList(config, "hidden_sizes", {128, 192, 512, 1088}));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {2, 6, 12, 2}));
  TS_RETURN_IF_ERROR(CheckAllPositive("hidden_sizes", c.hidden_sizes));
  TS_RETURN_IF_ERROR(CheckAllPositive("depths", c.depths));
  if (c.hidden_sizes.empty()) return InvalidArgumentError("hidden_sizes: must not be empty");
  TS_RETURN_IF_ERROR(CheckLen("depths", c.depths, c.hidden_sizes.size()));
  for (int64_t h : c.hidden_sizes) {
    // nn.Conv2d needs the width divisible by its max(1, out // groups_width) groups.
    if (h % std::max<int64_t>(1, h / c.groups_width) != 0) {
      return r.Error("groups_width", "splits hidden size " + std::to_string(h) +
                                         " into groups that do not divide it");
    }
  }
  TS_ASSIGN_OR_RETURN(std::string lt, r.String("layer_type", "y"));
  if (lt != "x" && lt != "y") return r.Error("layer_type", "unknown '" + lt + "'");
  c.y_layers = lt == "y";
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "relu"));
  TS_ASSIGN_OR_RETURN(c.downsample_in_first_stage, r.Bool("downsample_in_first_stage", true));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleRegNet(const json& config) {
  TS_ASSIGN_OR_RETURN(RegNetConfig c, ParseRegNet(config));
  json t = config;
  // Last stage 128 wide, widths multiples of 8 and groups of 8 channels (at least two groups in
  // every grouped conv wider than 8), one layer per stage.
  const int64_t last = c.hidden_sizes.back();
  std::vector<int64_t> hs, ds;
  for (int64_t h : c.hidden_sizes)
    hs.push_back(std::max<int64_t>(8, ScaleRatio(h, last, 128, 8) / 8 * 8));
  for (int64_t d : c.depths) ds.push_back(std::min<int64_t>(d, 1));
  t["hidden_sizes"] = hs;
  t["depths"] = ds;
  t["groups_width"] = 8;
  t["embedding_size"] = std::max<int64_t>(8, ScaleRatio(c.embedding_size, last, 128, 8));
  t["image_size"] = TinyProfile::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

// RegNetXLayer / RegNetYLayer under `lp`.
ConvBlock RegNetBlock(const RegNetConfig& c, const std::string& lp, int64_t in, int64_t out,
                      int64_t stride) {
  auto conv_bn = [&](const std::string& p, int64_t i, int64_t o, int64_t k, int64_t s, int64_t g,
                     bool act) {
    return MakeConvBn(lp + p, "convolution", "normalization", i, o, k, s, g, act);
  };
  ConvBlock b;
  b.residual = ConvBlock::Residual::kActOfBranchPlusInput;
  if (in != out || stride != 1) b.shortcut = conv_bn("shortcut.", in, out, 1, stride, 1, false);
  const int64_t groups = std::max<int64_t>(1, out / c.groups_width);
  b.layers.push_back(conv_bn("layer.0.", in, out, 1, 1, 1, true));
  b.layers.push_back(conv_bn("layer.1.", out, out, 3, stride, groups, true));
  if (c.y_layers) {
    b.se = lp + "layer.2.";
    b.se_reduce = "attention.1";
    b.se_expand = "attention.3";
    // int(round(in_channels / 4)): Python rounds halves to even, as nearbyint does by default.
    b.se_width = static_cast<int64_t>(std::nearbyint(static_cast<double>(in) / 4.0));
    b.se_act = VisionActivation{.relu6 = false, .act = Activation::kRelu};
  }
  b.layers.push_back(conv_bn(c.y_layers ? "layer.3." : "layer.2.", out, out, 1, 1, 1, false));
  return b;
}

ConvTrunkRecipe RegNetRecipe(const RegNetConfig& c, const std::string& pre) {
  ConvTrunkRecipe r;
  r.channels = c.num_channels;
  r.image_size = c.image_size;
  r.act = c.act;
  r.bn_eps = 1e-5;
  r.pool_keepdim = true;
  r.stem.push_back(MakeConvBn(pre + "embedder.embedder.", "convolution", "normalization",
                              c.num_channels, c.embedding_size, 3, 2, 1, true));
  int64_t in = c.embedding_size, hw = (c.image_size + 1) / 2;
  for (size_t s = 0; s < c.hidden_sizes.size(); ++s) {
    const int64_t out = c.hidden_sizes[s];
    const int64_t stage_stride = s == 0 ? (c.downsample_in_first_stage ? 2 : 1) : 2;
    for (int64_t l = 0; l < c.depths[s]; ++l) {
      const int64_t stride = l == 0 ? stage_stride : 1;
      const std::string lp =
          pre + "encoder.stages." + std::to_string(s) + ".layers." + std::to_string(l) + ".";
      r.blocks.push_back(RegNetBlock(c, lp, in, out, stride));
      in = out;
      hw = (hw + stride - 1) / stride;
    }
  }
  r.out_channels = c.hidden_sizes.back();
  r.out_hw = hw;
  return r;
}

StatusOr<PooledVisionTrunk> RegNetTrunk(const json& config, const std::string& prefix) {
  TS_ASSIGN_OR_RETURN(RegNetConfig c, ParseRegNet(config));
  return PooledVisionTrunk{std::make_unique<ConvTrunk>(RegNetRecipe(c, prefix)), c.num_labels};
}

std::vector<ArchEntry> RegNetArchs() {
  // facebook/regnet-y-040's layout (RegNetConfig's defaults).
  const json regnet = {{"model_type", "regnet"},
                       {"num_channels", 3},
                       {"embedding_size", 32},
                       {"hidden_sizes", {128, 192, 512, 1088}},
                       {"depths", {2, 6, 12, 2}},
                       {"groups_width", 64},
                       {"layer_type", "y"},
                       {"hidden_act", "relu"},
                       {"downsample_in_first_stage", true},
                       {"num_labels", 1000}};
  return PooledVisionArchs({"RegNet", "regnet", "regnet.", "classifier.1."}, regnet, ScaleRegNet,
                           RegNetTrunk);
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(RegNet, RegNetArchs);

}  // namespace ts::zoo::internal
