// dinov3_convnext (modeling_dinov3_convnext.py): DINOv3ConvNextModel and DINOv3ConvNextBackbone.
// Stages `stages.I.`: downsample_layers (stage 0: a 4 / 4 conv then a channels-first LayerNorm;
// later stages: the LayerNorm then a 2 / 2 conv), then layers `layers.J.`: x + gamma *
// pointwise_conv2(act(pointwise_conv1(layer_norm(depthwise_conv(x))))) over channels-last
// tokens (a 7 x 7 depthwise conv, Linears of 4 x width). The model pools the last map to one
// token, prepends it to the map's tokens and applies `layer_norm`: last_hidden_state [B, 1 + HW,
// C], pooler_output token 0. The backbone (stages only) returns the last stage's map (the
// default out_features). Config: num_channels, hidden_sizes, depths, hidden_act, layer_norm_eps,
// layer_scale_init_value (init only), image_size. The trunk lives here: only this family uses it.
#include <algorithm>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct Dinov3ConvNextConfig {
  int64_t num_channels = 3, image_size = 224;
  std::vector<int64_t> hidden_sizes, depths;
  double eps = 1e-6;
  VisionActivation act;
};

StatusOr<Dinov3ConvNextConfig> ParseDinov3ConvNext(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  Dinov3ConvNextConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.hidden_sizes, IntList(config, "hidden_sizes", {96, 192, 384, 768}));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {3, 3, 9, 3}));
  TS_RETURN_IF_ERROR(CheckAllPositive("hidden_sizes", c.hidden_sizes));
  TS_RETURN_IF_ERROR(CheckAllPositive("depths", c.depths));
  if (c.hidden_sizes.empty()) return InvalidArgumentError("hidden_sizes: must not be empty");
  TS_RETURN_IF_ERROR(CheckLen("depths", c.depths, c.hidden_sizes.size()));
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_eps", 1e-6));
  if (c.eps <= 0) return r.Error("layer_norm_eps", "must be > 0");
  TS_RETURN_IF_ERROR(r.Double("layer_scale_init_value", 1e-6).status());
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "gelu"));
  int64_t side = c.image_size / 4;
  for (size_t i = 1; i < c.hidden_sizes.size(); ++i) side /= 2;
  if (side < 1) return r.Error("image_size", "leaves no pixels for the last stage");
  return c;
}

class Dinov3ConvNextTrunk : public VisionTrunk {
 public:
  // `backbone`: the stages only, last_hidden_state the last map; otherwise the model's tokens.
  Dinov3ConvNextTrunk(Dinov3ConvNextConfig c, bool backbone)
      : VisionTrunk(c.num_channels, c.image_size), c_(std::move(c)), backbone_(backbone) {
    side_ = c_.image_size / 4;
    for (size_t i = 0; i < c_.hidden_sizes.size(); ++i) {
      const int64_t out = c_.hidden_sizes[i],
                    in = i == 0 ? c_.num_channels : c_.hidden_sizes[i - 1];
      const std::string d = "stages." + std::to_string(i) + ".downsample_layers.";
      if (i == 0) {
        Add(d + "0.weight", {out, in, 4, 4});
        Add(d + "0.bias", {out});
        Add(d + "1.weight", {out});
        Add(d + "1.bias", {out});
      } else {
        Add(d + "0.weight", {in});
        Add(d + "0.bias", {in});
        Add(d + "1.weight", {out, in, 2, 2});
        Add(d + "1.bias", {out});
        side_ /= 2;
      }
      for (int64_t j = 0; j < c_.depths[i]; ++j) {
        const std::string l = "stages." + std::to_string(i) + ".layers." + std::to_string(j) + ".";
        Add(l + "depthwise_conv.weight", {out, 1, 7, 7});
        Add(l + "depthwise_conv.bias", {out});
        Add(l + "layer_norm.weight", {out});
        Add(l + "layer_norm.bias", {out});
        Add(l + "pointwise_conv1.weight", {4 * out, out});
        Add(l + "pointwise_conv1.bias", {4 * out});
        Add(l + "pointwise_conv2.weight", {out, 4 * out});
        Add(l + "pointwise_conv2.bias", {out});
        Add(l + "gamma", {out});
      }
    }
    if (!backbone_) {
      Add("layer_norm.weight", {c_.hidden_sizes.back()});
      Add("layer_norm.bias", {c_.hidden_sizes.back()});
    }
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    auto ln = [&](const std::string& p, const at::Tensor& x) {
      return nn::LayerNorm(x, GetWeight(w, p + "weight"), GetWeight(w, p + "bias"), c_.eps);
    };
    auto ln_first = [&](const std::string& p, const at::Tensor& x) {  // channels_first
      return ln(p, x.permute({0, 2, 3, 1})).permute({0, 3, 1, 2});
    };
    at::Tensor x = pixel_values;
    for (size_t i = 0; i < c_.hidden_sizes.size(); ++i) {
      const std::string d = "stages." + std::to_string(i) + ".downsample_layers.";
      if (i == 0) {
        x = ln_first(d + "1.",
                     nn::Conv2d(x, GetWeight(w, d + "0.weight"), GetWeight(w, d + "0.bias"), 4));
      } else {
        x = nn::Conv2d(ln_first(d + "0.", x), GetWeight(w, d + "1.weight"),
                       GetWeight(w, d + "1.bias"), 2);
      }
      for (int64_t j = 0; j < c_.depths[i]; ++j) {
        const std::string l = "stages." + std::to_string(i) + ".layers." + std::to_string(j) + ".";
        at::Tensor y = nn::Conv2d(x, GetWeight(w, l + "depthwise_conv.weight"),
                                  GetWeight(w, l + "depthwise_conv.bias"), 1, 3, x.size(1));
        y = ln(l + "layer_norm.", y.permute({0, 2, 3, 1}));
        y = Activate(nn::Linear(y, GetWeight(w, l + "pointwise_conv1.weight"),
                                GetWeight(w, l + "pointwise_conv1.bias")),
                     c_.act);
        y = nn::Linear(y, GetWeight(w, l + "pointwise_conv2.weight"),
                       GetWeight(w, l + "pointwise_conv2.bias")) *
            GetWeight(w, l + "gamma");
        x = x + y.permute({0, 3, 1, 2});
      }
    }
    if (backbone_) return {x, x.mean({2, 3})};
    at::Tensor pooled = x.mean({2, 3}, /*keepdim=*/true).flatten(2).transpose(1, 2);
    at::Tensor tokens = ln("layer_norm.", at::cat({pooled, x.flatten(2).transpose(1, 2)}, 1));
    return {tokens, tokens.select(1, 0)};
  }

  std::vector<int64_t> LastHiddenShape() const override {
    if (backbone_) return {c_.hidden_sizes.back(), side_, side_};
    return {1 + side_ * side_, c_.hidden_sizes.back()};
  }
  int64_t PooledWidth() const override { return c_.hidden_sizes.back(); }
  // gamma starts at layer_scale_init_value (1e-6) in transformers, which would hide the layers:
  // U(0.5, 1.5) as ConvNeXt's layer scale.
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (name.size() < 6 || name.compare(name.size() - 6, 6, ".gamma") != 0) return false;
    t.uniform_(0.5, 1.5, gen);
    return true;
  }

 private:
  Dinov3ConvNextConfig c_;
  bool backbone_;
  int64_t side_ = 0;
};

StatusOr<json> ScaleDinov3ConvNext(const json& config) {
  TS_ASSIGN_OR_RETURN(Dinov3ConvNextConfig c, ParseDinov3ConvNext(config));
  json t = config;
  // Last stage 128 wide (multiples of 8), one layer per stage; 32 pixels give 8, 4, 2, 1 per
  // side over the four stages.
  const int64_t last = c.hidden_sizes.back();
  std::vector<int64_t> hs, ds;
  for (int64_t h : c.hidden_sizes) {
    hs.push_back(std::max<int64_t>(8, ScaleRatio(h, last, 128, 8) / 8 * 8));
  }
  for (int64_t d : c.depths) ds.push_back(std::min<int64_t>(d, 1));
  t["hidden_sizes"] = hs;
  t["depths"] = ds;
  t["image_size"] = TinyProfile::kImageSize;
  TS_RETURN_IF_ERROR(ParseDinov3ConvNext(t).status());
  SetTinyRunProfile(t, 1);
  return t;
}

StatusOr<json> ScaleDinov3ConvNextBackbone(const json& config) {
  TS_ASSIGN_OR_RETURN(Dinov3ConvNextConfig c, ParseDinov3ConvNext(config));
  TS_RETURN_IF_ERROR(CheckLastStageBackbone(config, static_cast<int64_t>(c.depths.size())));
  TS_ASSIGN_OR_RETURN(json t, ScaleDinov3ConvNext(config));
  t.erase("stage_names");
  return t;
}

StatusOr<std::unique_ptr<Model>> BuildDinov3ConvNext(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(Dinov3ConvNextConfig c, ParseDinov3ConvNext(spec.tiny_config));
  const bool backbone = spec.arch == "DINOv3ConvNextBackbone";
  if (backbone) {
    TS_RETURN_IF_ERROR(
        CheckLastStageBackbone(spec.tiny_config, static_cast<int64_t>(c.depths.size())));
  }
  const int64_t width = c.hidden_sizes.back();
  auto trunk = std::make_unique<Dinov3ConvNextTrunk>(std::move(c), backbone);
  std::unique_ptr<ImageHead> head =
      backbone ? BackboneHead({.prefix_tokens = -1, .map_shape = trunk->LastHiddenShape()})
               : ImageFeaturesHead({.tanh_pooler = false,
                                    .width = width,
                                    .loss = FeatureLoss::kTargetAndZeroPooled,
                                    .last_hidden_shape = trunk->LastHiddenShape()});
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

std::vector<ArchEntry> Dinov3ConvNextArchs() {
  // facebook/dinov3-convnext-tiny-pretrain-lvd1689m.
  const json example = {{"model_type", "dinov3_convnext"},
                        {"num_channels", 3},
                        {"hidden_sizes", {96, 192, 384, 768}},
                        {"depths", {3, 3, 9, 3}},
                        {"hidden_act", "gelu"},
                        {"layer_norm_eps", 1e-6},
                        {"layer_scale_init_value", 1e-6},
                        {"drop_path_rate", 0.0},
                        {"image_size", 224},
                        {"initializer_range", 0.02}};
  json backbone = WithArchitecture(example, "DINOv3ConvNextBackbone");
  backbone["out_features"] = {"stage4"};
  return {{{"DINOv3ConvNextModel", "dinov3_convnext", "image-feature-extraction"},
           WithArchitecture(example, "DINOv3ConvNextModel"),
           ScaleDinov3ConvNext,
           BuildDinov3ConvNext},
          {{"DINOv3ConvNextBackbone", "dinov3_convnext", "backbone"},
           backbone,
           ScaleDinov3ConvNextBackbone,
           BuildDinov3ConvNext}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Dinov3ConvNext, Dinov3ConvNextArchs);

}  // namespace ts::zoo::internal
