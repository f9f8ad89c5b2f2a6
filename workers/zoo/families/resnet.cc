// ResNet: ResNetModel, ResNetForImageClassification, ResNetBackbone. Config -> conv trunk recipe
// (trunks/vision_conv.h) and the example config.
#include <algorithm>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_conv.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct ResNetConfig {
  int64_t num_channels = 3, embedding_size = 64;
  std::vector<int64_t> hidden_sizes, depths;
  bool bottleneck = true, downsample_in_first_stage = false, downsample_in_bottleneck = false;
  VisionActivation act;
  int64_t num_labels = 2;
  int64_t image_size = 224;
};

StatusOr<ResNetConfig> ParseResNet(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  ResNetConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.embedding_size, PositiveInt(r, "embedding_size", 64));
  TS_ASSIGN_OR_RETURN(c.hidden_sizes, IntList(config, "hidden_sizes", {256, 512, 1024, 2048}));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {3, 4, 6, 3}));
  TS_RETURN_IF_ERROR(CheckAllPositive("hidden_sizes", c.hidden_sizes));
  TS_RETURN_IF_ERROR(CheckAllPositive("depths", c.depths));
  if (c.hidden_sizes.empty()) return InvalidArgumentError("hidden_sizes: must not be empty");
  TS_RETURN_IF_ERROR(CheckLen("depths", c.depths, c.hidden_sizes.size()));
  TS_ASSIGN_OR_RETURN(std::string lt, r.String("layer_type", "bottleneck"));
  if (lt != "bottleneck" && lt != "basic") return r.Error("layer_type", "unknown '" + lt + "'");
  c.bottleneck = lt == "bottleneck";
  if (c.bottleneck) {
    for (int64_t h : c.hidden_sizes) {
      if (h % 4 != 0) {
        return InvalidArgumentError("hidden_sizes: must be multiples of 4 (bottleneck reduction)");
      }
    }
  }
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "relu"));
  TS_ASSIGN_OR_RETURN(c.downsample_in_first_stage, r.Bool("downsample_in_first_stage", false));
  TS_ASSIGN_OR_RETURN(c.downsample_in_bottleneck, r.Bool("downsample_in_bottleneck", false));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleResNet(const json& config) {
  TS_ASSIGN_OR_RETURN(ResNetConfig c, ParseResNet(config));
  json t = config;
  const int64_t last = c.hidden_sizes.back();
  std::vector<int64_t> hs;
  // Last stage 128 wide; the stem keeps its ratio (floor 8), so stage 0 keeps its projection
  // shortcut (64 -> 256 in resnet-50 becomes 8 -> 16).
  for (int64_t h : c.hidden_sizes) {
    hs.push_back(std::max<int64_t>(8, ScaleRatio(h, last, 128, 8) / 4 * 4));
  }
  std::vector<int64_t> ds;
  for (int64_t d : c.depths) ds.push_back(std::min<int64_t>(d, 1));
  t["hidden_sizes"] = hs;
  t["depths"] = ds;
  t["embedding_size"] = std::max<int64_t>(8, ScaleRatio(c.embedding_size, last, 128, 8));
  t["image_size"] = TinyProfile::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

// A bottleneck (1x1 reduce, 3x3, 1x1 expand) or basic (3x3, 3x3) block. Its inner convs use
// relu whatever hidden_act says: transformers' ResNetBasicLayer and ResNetBottleNeckLayer build
// their ResNetConvLayers with the default activation="relu" and apply hidden_act only after the
// residual sum (the embedder's conv does use hidden_act).
ConvBlock ResNetBlock(const ResNetConfig& c, const std::string& lp, int64_t in, int64_t out,
                      int64_t stride) {
  auto conv_bn = [&](const std::string& p, int64_t i, int64_t o, int64_t k, int64_t s, bool act) {
    ConvBnLayer l = MakeConvBn(lp + p, "convolution", "normalization", i, o, k, s, 1, act);
    if (act) l.own_act = VisionActivation{.relu6 = false, .act = Activation::kRelu};
    return l;
  };
  ConvBlock b;
  b.residual = ConvBlock::Residual::kActOfBranchPlusInput;
  if (in != out || stride != 1) b.shortcut = conv_bn("shortcut.", in, out, 1, stride, false);
  if (!c.bottleneck) {
    b.layers.push_back(conv_bn("layer.0.", in, out, 3, stride, true));
    b.layers.push_back(conv_bn("layer.1.", out, out, 3, 1, false));
    return b;
  }
  const int64_t red = out / 4;
  const bool first = c.downsample_in_bottleneck;
  b.layers.push_back(conv_bn("layer.0.", in, red, 1, first ? stride : 1, true));
  b.layers.push_back(conv_bn("layer.1.", red, red, 3, first ? 1 : stride, true));
  b.layers.push_back(conv_bn("layer.2.", red, out, 1, 1, false));
  return b;
}

ConvTrunkRecipe ResNetRecipe(const ResNetConfig& c, const std::string& pre) {
  ConvTrunkRecipe r;
  r.channels = c.num_channels;
  r.image_size = c.image_size;
  r.act = c.act;
  r.bn_eps = 1e-5;
  r.pool_keepdim = true;
  r.stem.push_back(MakeConvBn(pre + "embedder.embedder.", "convolution", "normalization",
                              c.num_channels, c.embedding_size, 7, 2, 1, true));
  r.stem_max_pool = true;
  int64_t in = c.embedding_size, hw = c.image_size / 4;
  for (size_t s = 0; s < c.hidden_sizes.size(); ++s) {
    const int64_t out = c.hidden_sizes[s];
    const int64_t stage_stride = s == 0 ? (c.downsample_in_first_stage ? 2 : 1) : 2;
    for (int64_t l = 0; l < c.depths[s]; ++l) {
      const int64_t stride = l == 0 ? stage_stride : 1;
      const std::string lp =
          pre + "encoder.stages." + std::to_string(s) + ".layers." + std::to_string(l) + ".";
      r.blocks.push_back(ResNetBlock(c, lp, in, out, stride));
      in = out;
      hw = (hw + stride - 1) / stride;
    }
  }
  r.out_channels = c.hidden_sizes.back();
  r.out_hw = hw;
  return r;
}

StatusOr<PooledVisionTrunk> ResNetTrunk(const json& config, const std::string& prefix) {
  TS_ASSIGN_OR_RETURN(ResNetConfig c, ParseResNet(config));
  return PooledVisionTrunk{std::make_unique<ConvTrunk>(ResNetRecipe(c, prefix)), c.num_labels};
}

// ResNetBackbone (modeling_resnet.py, BackboneMixin): ResNetModel's embedder and encoder under
// the same names (no pooler weights); feature_maps = the encoder's hidden states at out_features,
// which default to the last stage ("stage<len(depths)>"), the only selection the zoo serves:
// ResNetModel's last_hidden_state. transformers gives backbones no loss (BackboneHead: MSE onto
// a random map).
StatusOr<json> ScaleResNetBackbone(const json& config) {
  TS_ASSIGN_OR_RETURN(ResNetConfig c, ParseResNet(config));
  TS_RETURN_IF_ERROR(CheckLastStageBackbone(config, static_cast<int64_t>(c.depths.size())));
  TS_ASSIGN_OR_RETURN(json t, ScaleResNet(config));
  t.erase("num_labels");
  t.erase("id2label");
  t.erase("label2id");
  return t;
}

StatusOr<std::unique_ptr<Model>> BuildResNetBackbone(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(ResNetConfig c, ParseResNet(spec.tiny_config));
  TS_RETURN_IF_ERROR(
      CheckLastStageBackbone(spec.tiny_config, static_cast<int64_t>(c.depths.size())));
  auto trunk = std::make_unique<ConvTrunk>(ResNetRecipe(c, ""));
  auto head = BackboneHead({.prefix_tokens = -1, .map_shape = trunk->LastHiddenShape()});
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

}  // namespace

std::vector<ArchEntry> ResNetArchs() {
  // Modelled on microsoft/resnet-50.
  const json resnet = {{"model_type", "resnet"},
                       {"num_channels", 3},
                       {"embedding_size", 64},
                       {"hidden_sizes", {256, 512, 1024, 2048}},
                       {"depths", {3, 4, 6, 3}},
                       {"layer_type", "bottleneck"},
                       {"hidden_act", "relu"},
                       {"downsample_in_first_stage", false},
                       {"downsample_in_bottleneck", false},
                       {"num_labels", 1000}};
  std::vector<ArchEntry> out = PooledVisionArchs({"ResNet", "resnet", "resnet.", "classifier.1."},
                                                 resnet, ScaleResNet, ResNetTrunk);
  json backbone = WithArchitecture(resnet, "ResNetBackbone");
  backbone.erase("num_labels");
  backbone["out_features"] = {"stage4"};
  out.push_back({{"ResNetBackbone", "resnet", "backbone"},
                 std::move(backbone),
                 ScaleResNetBackbone,
                 BuildResNetBackbone});
  return out;
}

TS_ZOO_REGISTER_FAMILY(ResNet, ResNetArchs);

}  // namespace ts::zoo::internal
