// timesformer (modeling_timesformer.py): TimesformerModel (last_hidden_state after the final
// layernorm) and TimesformerForVideoClassification (`classifier` on token 0; cross entropy, MSE
// for one label) on the TimeSformer trunk (trunks/vision_video.h: divided space-time attention).
// The batch's pixel_values are [B, num_frames, C, H, W]. Config: the ViT fields (hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads, hidden_act, layer_norm_eps (1e-6),
// image_size, patch_size, num_channels, qkv_bias), num_frames, attention_type (only
// "divided_space_time", the default and every published checkpoint's: "space_only" runs the
// frames as separate images, "joint_space_time" one attention over all tokens).
#include <algorithm>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_video.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct TimesformerConfig {
  TimesformerRecipe recipe;
  int64_t num_labels = 2;
};

StatusOr<TimesformerConfig> ParseTimesformer(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  json c = config;
  if (!c.contains("layer_norm_eps")) c["layer_norm_eps"] = 1e-6;  // TimesformerConfig's default
  TS_ASSIGN_OR_RETURN(VitConfig v, ParseVitConfig(c));
  ConfigReader r(config);
  TS_ASSIGN_OR_RETURN(std::string type, r.String("attention_type", "divided_space_time"));
  if (type != "divided_space_time")
    return r.Error("attention_type",
                   "only divided_space_time is supported by the zoo, got '" + type + "'");
  TimesformerConfig out;
  TimesformerRecipe& t = out.recipe;
  TS_ASSIGN_OR_RETURN(t.frames, r.Int("num_frames", 8));
  if (t.frames <= 0) return r.Error("num_frames", "must be positive");
  t.image_size = v.image_size;
  t.patch_size = v.patch_size;
  t.channels = v.num_channels;
  t.hidden = v.hidden_size;
  t.intermediate = v.intermediate_size;
  t.layers = v.num_hidden_layers;
  t.heads = v.num_attention_heads;
  t.act = v.hidden_act;
  t.eps = v.layer_norm_eps;
  t.qkv_bias = v.qkv_bias;
  out.num_labels = v.num_labels;
  return out;
}

// The ViT width policy and 4 frames.
StatusOr<json> ScaleTimesformer(const json& config) {
  TS_ASSIGN_OR_RETURN(TimesformerConfig c, ParseTimesformer(config));
  json real = config;
  if (!real.contains("layer_norm_eps")) real["layer_norm_eps"] = 1e-6;
  TS_ASSIGN_OR_RETURN(json t, ScaleToTiny(real, "vit"));
  t["num_frames"] = std::min<int64_t>(c.recipe.frames, 4);
  TS_ASSIGN_OR_RETURN(TimesformerConfig tiny, ParseTimesformer(t));
  SetTinyRunProfile(t, 1 + tiny.recipe.Patches() * tiny.recipe.frames);
  return t;
}

decltype(ArchEntry::build) BuildTimesformer(bool classifier) {
  return [classifier](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(TimesformerConfig c, ParseTimesformer(spec.tiny_config));
    if (classifier) c.recipe.prefix = "timesformer.";
    auto trunk = std::make_unique<TimesformerTrunk>(c.recipe);
    std::unique_ptr<ImageHead> head =
        classifier ? ImageClassificationHead({.prefix = "classifier.",
                                              .num_labels = c.num_labels,
                                              .width = c.recipe.hidden,
                                              .flatten = false})
                   : ImageFeaturesHead({.tanh_pooler = false,
                                        .width = c.recipe.hidden,
                                        .loss = FeatureLoss::kTargetAndZeroPooled,
                                        .last_hidden_shape = trunk->LastHiddenShape(),
                                        .pooler_output = false});
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
  };
}

std::vector<ArchEntry> TimesformerArchs() {
  // facebook/timesformer-base-finetuned-k400.
  const json example = {{"model_type", "timesformer"},
                        {"hidden_size", 768},
                        {"intermediate_size", 3072},
                        {"num_attention_heads", 12},
                        {"num_hidden_layers", 12},
                        {"hidden_act", "gelu"},
                        {"layer_norm_eps", 1e-6},
                        {"image_size", 224},
                        {"patch_size", 16},
                        {"num_channels", 3},
                        {"num_frames", 8},
                        {"qkv_bias", true},
                        {"attention_type", "divided_space_time"},
                        {"initializer_range", 0.02},
                        {"drop_path_rate", 0},
                        {"num_labels", 400}};
  json base = example;
  base.erase("num_labels");
  return {{{"TimesformerModel", "timesformer", "image-feature-extraction"},
           WithArchitecture(base, "TimesformerModel"),
           ScaleTimesformer,
           BuildTimesformer(false)},
          {{"TimesformerForVideoClassification", "timesformer", "video-classification"},
           WithArchitecture(example, "TimesformerForVideoClassification"),
           ScaleTimesformer,
           BuildTimesformer(true)}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Timesformer, TimesformerArchs);

}  // namespace ts::zoo::internal
