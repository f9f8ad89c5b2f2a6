// beit (modular_beit.py): BeitModel and BeitForImageClassification on the BEiT trunk
// (trunks/vision_beit.h). Config: the ViT fields (hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads, hidden_act, layer_norm_eps, image_size, patch_size,
// num_channels), layer_scale_init_value (> 0: the lambdas; its value only sets their init),
// use_absolute_position_embeddings, use_relative_position_bias,
// use_shared_relative_position_bias, use_mean_pooling. BeitBackbone (backbone: BeitModel without
// its pooler under "encoder.", feature_maps the last layer's patch tokens as a map; the default
// out_features only, add_fpn and reshape_hidden_states false refused). BeitForSemanticSegmentation
// (its UperNet head and FPN) and BeitForMaskedImageModeling (not in transformers' task table) are
// not built.
#include "workers/zoo/families/beit.h"

#include <algorithm>

#include "workers/zoo/config.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/state_dict.h"
#include "workers/zoo/trunks/vision_beit.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct BeitConfig {
  BeitRecipe recipe;
  int64_t num_labels = 2;
};

StatusOr<BeitConfig> ParseBeit(const json& config) {
  TS_ASSIGN_OR_RETURN(VitConfig v, ParseVitConfig(config));
  ConfigReader r(config);
  BeitConfig c;
  BeitRecipe& b = c.recipe;
  b.image_size = v.image_size;
  b.patch_size = v.patch_size;
  b.channels = v.num_channels;
  b.hidden = v.hidden_size;
  b.intermediate = v.intermediate_size;
  b.layers = v.num_hidden_layers;
  b.heads = v.num_attention_heads;
  b.act = v.hidden_act;
  b.eps = v.layer_norm_eps;
  TS_ASSIGN_OR_RETURN(double scale, r.Double("layer_scale_init_value", 0.1));
  b.layer_scale = scale > 0;
  TS_ASSIGN_OR_RETURN(b.absolute_positions, r.Bool("use_absolute_position_embeddings", false));
  TS_ASSIGN_OR_RETURN(b.relative_bias, r.Bool("use_relative_position_bias", false));
  TS_ASSIGN_OR_RETURN(b.shared_relative_bias, r.Bool("use_shared_relative_position_bias", false));
  TS_ASSIGN_OR_RETURN(b.mean_pooling, r.Bool("use_mean_pooling", true));
  c.num_labels = v.num_labels;
  return c;
}

StatusOr<json> ScaleBeit(const json& config) {
  TS_RETURN_IF_ERROR(ParseBeit(config).status());
  TS_ASSIGN_OR_RETURN(json t, ScaleToTiny(config, "vit"));
  const int64_t grid = TinyProfile::kImageSize / TinyProfile::kPatchSize;
  SetTinyRunProfile(t, grid * grid + 1);
  return t;
}

// The backbone fields only BeitBackbone reads: the last stage, reshaped, no FPN.
Status CheckBeitBackbone(const json& config, int64_t layers) {
  ConfigReader r(config);
  TS_ASSIGN_OR_RETURN(bool fpn, r.Bool("add_fpn", false));
  if (fpn) return r.Error("add_fpn", "true is not supported by the zoo");
  TS_ASSIGN_OR_RETURN(bool reshape, r.Bool("reshape_hidden_states", true));
  if (!reshape) return r.Error("reshape_hidden_states", "false is not supported by the zoo");
  return CheckLastStageBackbone(config, layers);
}

StatusOr<json> ScaleBeitBackbone(const json& config) {
  TS_ASSIGN_OR_RETURN(BeitConfig c, ParseBeit(config));
  TS_RETURN_IF_ERROR(CheckBeitBackbone(config, c.recipe.layers));
  TS_ASSIGN_OR_RETURN(json t, ScaleBeit(config));
  const int64_t layers = t["num_hidden_layers"].get<int64_t>();
  if (t.contains("out_features")) t["out_features"] = {"stage" + std::to_string(layers)};
  if (t.contains("out_indices")) t["out_indices"] = {layers};
  t.erase("stage_names");
  t.erase("num_labels");
  return t;
}

StatusOr<std::unique_ptr<Model>> BuildBeitBackbone(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(BeitConfig c, ParseBeit(spec.tiny_config));
  TS_RETURN_IF_ERROR(CheckBeitBackbone(spec.tiny_config, c.recipe.layers));
  c.recipe.prefix = "encoder.";
  c.recipe.backbone = true;
  const int64_t g = c.recipe.Grid();
  auto trunk = std::make_unique<BeitTrunk>(c.recipe);
  auto head = BackboneHead({.prefix_tokens = 1, .grid = g, .map_shape = {c.recipe.hidden, g, g}});
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

// BeitModel's final layernorm (use_mean_pooling false) is built and never called by the
// backbone: a state_dict entry, not a weight (it would have no gradient).
void AddBackboneLayernorm(StateDictBuilder& sd) {
  const auto& weights = sd.weights();
  if (!weights.count("encoder.embeddings.cls_token")) return;
  const int64_t h = weights.at("encoder.embeddings.cls_token").back();
  const nlohmann::json& c = sd.model().spec().tiny_config;
  if (c.value("use_mean_pooling", true)) return;
  sd.AddUnused("encoder.layernorm.weight", {h});
  sd.AddUnused("encoder.layernorm.bias", {h});
}

decltype(ArchEntry::build) BuildBeit(const BeitFamily& fam, bool classifier) {
  return [fam, classifier](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(BeitConfig c, ParseBeit(spec.tiny_config));
    if (classifier) c.recipe.prefix = fam.base;
    auto trunk = std::make_unique<BeitTrunk>(c.recipe);
    std::unique_ptr<ImageHead> head =
        classifier ? ImageClassificationHead({.prefix = "classifier.",
                                              .num_labels = c.num_labels,
                                              .width = c.recipe.hidden,
                                              .flatten = false})
                   : ImageFeaturesHead({.tanh_pooler = false,
                                        .width = c.recipe.hidden,
                                        .loss = FeatureLoss::kTargetAndZeroPooled,
                                        .last_hidden_shape = trunk->LastHiddenShape()});
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
  };
}

}  // namespace

std::vector<ArchEntry> BeitArchs(const BeitFamily& fam, const json& example) {
  json base = example;
  base.erase("num_labels");
  base["model_type"] = fam.model_type;
  json cls = example;
  cls["model_type"] = fam.model_type;
  std::vector<ArchEntry> archs = {
      {{fam.prefix + "Model", fam.model_type, "image-feature-extraction"},
       WithArchitecture(base, fam.prefix + "Model"),
       ScaleBeit,
       BuildBeit(fam, false)},
      {{fam.prefix + "ForImageClassification", fam.model_type, "image-classification"},
       WithArchitecture(cls, fam.prefix + "ForImageClassification"),
       ScaleBeit,
       BuildBeit(fam, true)}};
  if (fam.backbone) {
    ArchEntry e;
    e.info = {fam.prefix + "Backbone", fam.model_type, "backbone"};
    e.example_config = WithArchitecture(base, fam.prefix + "Backbone");
    e.scale = ScaleBeitBackbone;
    e.build = BuildBeitBackbone;
    e.state_dict.extra = AddBackboneLayernorm;
    archs.push_back(std::move(e));
  }
  return archs;
}

namespace {

std::vector<ArchEntry> BeitFamilyArchs() {
  // microsoft/beit-base-patch16-224 (ImageNet-1k fine-tuned).
  const json example = {{"hidden_size", 768},
                        {"intermediate_size", 3072},
                        {"num_attention_heads", 12},
                        {"num_hidden_layers", 12},
                        {"hidden_act", "gelu"},
                        {"layer_norm_eps", 1e-12},
                        {"image_size", 224},
                        {"patch_size", 16},
                        {"num_channels", 3},
                        {"use_mask_token", false},
                        {"use_absolute_position_embeddings", false},
                        {"use_relative_position_bias", true},
                        {"use_shared_relative_position_bias", false},
                        {"layer_scale_init_value", 0.1},
                        {"use_mean_pooling", true},
                        {"initializer_range", 0.02},
                        {"num_labels", 1000}};
  return BeitArchs({"beit", "Beit", "beit.", /*backbone=*/true}, example);
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Beit, BeitFamilyArchs);

}  // namespace ts::zoo::internal
