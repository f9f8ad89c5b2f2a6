// vivit (modular_vivit.py, transformers 5: ViViT on ViT's modules): VivitModel (last_hidden_state
// after the final layernorm, pooler_output tanh(pooler.dense(token 0))) and
// VivitForVideoClassification (`classifier` on token 0; cross entropy, MSE for one label) on the
// video trunk (trunks/vision_video.h): a Conv3d of kernel and stride tubelet_size over
// pixel_values [B, num_frames, C, H, W], the cls token, learned position embeddings and ViT's
// layers (`layers.N.attention.{q,k,v,o}_proj`, `mlp.fc1` / `fc2`). Config: the ViT fields
// (hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, hidden_act (default
// gelu_fast), layer_norm_eps (1e-6), image_size, num_channels, qkv_bias), num_frames,
// tubelet_size [t, h, w] (h == w: square patches only).
#include <algorithm>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_video.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct VivitConfig {
  VideoMaeRecipe recipe;
  int64_t num_labels = 2;
};

StatusOr<VivitConfig> ParseVivit(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  json c = config;
  // VivitConfig's own defaults where ViTConfig's differ.
  if (!c.contains("hidden_act")) c["hidden_act"] = "gelu_fast";
  if (!c.contains("layer_norm_eps")) c["layer_norm_eps"] = 1e-6;
  c.erase("patch_size");  // ViViT reads tubelet_size, not patch_size
  TS_ASSIGN_OR_RETURN(std::vector<int64_t> tubelet, IntList(config, "tubelet_size", {2, 16, 16}));
  TS_RETURN_IF_ERROR(CheckLen("tubelet_size", tubelet, 3));
  TS_RETURN_IF_ERROR(CheckAllPositive("tubelet_size", tubelet));
  if (tubelet[1] != tubelet[2])
    return InvalidArgumentError("tubelet_size: the zoo builds square patches only (" +
                                std::to_string(tubelet[1]) + " != " + std::to_string(tubelet[2]) +
                                ")");
  c["patch_size"] = tubelet[1];
  TS_ASSIGN_OR_RETURN(VitConfig v, ParseVitConfig(c));
  ConfigReader r(config);
  VivitConfig out;
  VideoMaeRecipe& m = out.recipe;
  m.vivit = true;
  m.image_size = v.image_size;
  m.patch_size = tubelet[1];
  m.tubelet = tubelet[0];
  m.channels = v.num_channels;
  TS_ASSIGN_OR_RETURN(m.frames, r.Int("num_frames", 32));
  if (m.frames <= 0) return r.Error("num_frames", "must be positive");
  if (m.frames % m.tubelet != 0)
    return r.Error("num_frames", "must be a multiple of tubelet_size[0] (" +
                                     std::to_string(m.frames) + " % " + std::to_string(m.tubelet) +
                                     " != 0)");
  PreLnEncoderRecipe& e = m.encoder;
  e.hidden = v.hidden_size;
  e.intermediate = v.intermediate_size;
  e.layers = v.num_hidden_layers;
  e.heads = v.num_attention_heads;
  e.act = v.hidden_act;
  e.eps = v.layer_norm_eps;
  e.qkv_bias = v.qkv_bias;
  e.naming = VitEncoderNaming();
  out.num_labels = v.num_labels;
  return out;
}

// The ViT width policy, then 4 frames in tubelets of at most 2 and the tiny patch size.
StatusOr<json> ScaleVivit(const json& config) {
  TS_ASSIGN_OR_RETURN(VivitConfig c, ParseVivit(config));
  json real = config;
  if (!real.contains("hidden_act")) real["hidden_act"] = "gelu_fast";
  if (!real.contains("layer_norm_eps")) real["layer_norm_eps"] = 1e-6;
  real["patch_size"] = c.recipe.patch_size;
  TS_ASSIGN_OR_RETURN(json t, ScaleToTiny(real, "vit"));
  t.erase("patch_size");
  const int64_t tubelet = std::min<int64_t>(c.recipe.tubelet, 2);
  t["tubelet_size"] = {tubelet, TinyProfile::kPatchSize, TinyProfile::kPatchSize};
  t["num_frames"] = std::max<int64_t>(tubelet, 4 / tubelet * tubelet);
  TS_ASSIGN_OR_RETURN(VivitConfig tiny, ParseVivit(t));
  SetTinyRunProfile(t, tiny.recipe.Tokens());
  return t;
}

decltype(ArchEntry::build) BuildVivit(bool classifier) {
  return [classifier](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(VivitConfig c, ParseVivit(spec.tiny_config));
    if (classifier) c.recipe.prefix = "vivit.";
    auto trunk = std::make_unique<VideoMaeTrunk>(c.recipe);
    std::unique_ptr<ImageHead> head =
        classifier ? ImageClassificationHead({.prefix = "classifier.",
                                              .num_labels = c.num_labels,
                                              .width = c.recipe.encoder.hidden,
                                              .flatten = false})
                   : ImageFeaturesHead({.tanh_pooler = true,
                                        .width = c.recipe.encoder.hidden,
                                        .loss = FeatureLoss::kTargetAndZeroPooled,
                                        .last_hidden_shape = trunk->LastHiddenShape()});
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
  };
}

std::vector<ArchEntry> VivitArchs() {
  // google/vivit-b-16x2-kinetics400.
  const json example = {
      {"model_type", "vivit"},       {"hidden_size", 768},      {"intermediate_size", 3072},
      {"num_attention_heads", 12},   {"num_hidden_layers", 12}, {"hidden_act", "gelu_fast"},
      {"layer_norm_eps", 1e-6},      {"image_size", 224},       {"num_frames", 32},
      {"tubelet_size", {2, 16, 16}}, {"num_channels", 3},       {"qkv_bias", true},
      {"initializer_range", 0.02},   {"num_labels", 400}};
  json base = example;
  base.erase("num_labels");
  return {{{"VivitModel", "vivit", "image-feature-extraction"},
           WithArchitecture(base, "VivitModel"),
           ScaleVivit,
           BuildVivit(false)},
          {{"VivitForVideoClassification", "vivit", "video-classification"},
           WithArchitecture(example, "VivitForVideoClassification"),
           ScaleVivit,
           BuildVivit(true)}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Vivit, VivitArchs);

}  // namespace ts::zoo::internal
