// swinv2 (modular_swinv2.py): Swinv2Model, Swinv2ForImageClassification (`swinv2.`, the
// classifier on the mean-pooled tokens), Swinv2ForMaskedImageModeling (Swin's SimMIM decoder) and
// Swinv2Backbone (embeddings and encoder only: feature_maps the last stage's output as a map, no
// final layernorm; the default out_features only) on the Swin trunk with `v2`
// (trunks/vision_swin.h). Config: Swin's fields (families/swin.h) and pretrained_window_sizes
// (one per stage, 0 or > 1).
#include "workers/zoo/families/swin.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

StatusOr<SwinConfig> ParseSwinv2(const json& config) {
  TS_ASSIGN_OR_RETURN(SwinConfig c, ParseSwin(config));
  c.v2 = true;
  TS_ASSIGN_OR_RETURN(c.pretrained_window_sizes, IntList(config, "pretrained_window_sizes",
                                                         std::vector<int64_t>(c.depths.size(), 0)));
  TS_RETURN_IF_ERROR(
      CheckLen("pretrained_window_sizes", c.pretrained_window_sizes, c.depths.size()));
  for (int64_t p : c.pretrained_window_sizes) {
    // transformers divides the coordinates by pretrained_window_size - 1.
    if (p < 0 || p == 1)
      return ConfigReader(config).Error("pretrained_window_sizes",
                                        "entries must be 0 or > 1, got " + std::to_string(p));
  }
  return c;
}

// Swin's tiny scaling, pretrained_window_sizes cut to the tiny stages.
StatusOr<json> ScaleSwinv2Config(json t, const json& config) {
  TS_ASSIGN_OR_RETURN(SwinConfig c, ParseSwinv2(config));
  const size_t stages = t["depths"].size();
  t["pretrained_window_sizes"] =
      std::vector<int64_t>(c.pretrained_window_sizes.begin(),
                           c.pretrained_window_sizes.begin() + static_cast<std::ptrdiff_t>(stages));
  return t;
}

StatusOr<json> ScaleSwinv2(const json& config) {
  TS_RETURN_IF_ERROR(ParseSwinv2(config).status());
  TS_ASSIGN_OR_RETURN(json t, ScaleSwin(config));
  return ScaleSwinv2Config(std::move(t), config);
}

StatusOr<json> ScaleSwinv2MaskedImageModeling(const json& config) {
  TS_RETURN_IF_ERROR(ParseSwinv2(config).status());
  TS_ASSIGN_OR_RETURN(json t, ScaleSwinMaskedImageModeling(config));
  return ScaleSwinv2Config(std::move(t), config);
}

StatusOr<json> ScaleSwinv2Backbone(const json& config) {
  TS_ASSIGN_OR_RETURN(SwinConfig c, ParseSwinv2(config));
  TS_RETURN_IF_ERROR(CheckLastStageBackbone(config, static_cast<int64_t>(c.depths.size())));
  TS_ASSIGN_OR_RETURN(json t, ScaleSwinv2(config));
  const int64_t stages = static_cast<int64_t>(t["depths"].size());
  if (t.contains("out_features")) t["out_features"] = {"stage" + std::to_string(stages)};
  if (t.contains("out_indices")) t["out_indices"] = {stages};
  t.erase("stage_names");
  t.erase("num_labels");
  return t;
}

StatusOr<PooledVisionTrunk> Swinv2TrunkFor(const json& config, const std::string& prefix) {
  TS_ASSIGN_OR_RETURN(SwinConfig c, ParseSwinv2(config));
  c.prefix = prefix;
  return PooledVisionTrunk{std::make_unique<SwinTrunk>(c), c.num_labels};
}

StatusOr<std::unique_ptr<Model>> BuildSwinv2MaskedImageModeling(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(SwinConfig c, ParseSwinv2(spec.tiny_config));
  c.prefix = "swinv2.";
  return MakeSwinMaskedImageModel(std::move(spec), std::move(c));
}

StatusOr<std::unique_ptr<Model>> BuildSwinv2Backbone(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(SwinConfig c, ParseSwinv2(spec.tiny_config));
  TS_RETURN_IF_ERROR(
      CheckLastStageBackbone(spec.tiny_config, static_cast<int64_t>(c.depths.size())));
  c.final_norm = false;
  auto trunk = std::make_unique<SwinTrunk>(c);
  const int64_t side = trunk->LastSide(), width = trunk->PooledWidth();
  auto head = BackboneHead({.prefix_tokens = 0, .grid = side, .map_shape = {width, side, side}});
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

std::vector<ArchEntry> Swinv2Archs() {
  // microsoft/swinv2-tiny-patch4-window8-256.
  const json swinv2 = {{"model_type", "swinv2"},
                       {"image_size", 256},
                       {"patch_size", 4},
                       {"num_channels", 3},
                       {"embed_dim", 96},
                       {"depths", {2, 2, 6, 2}},
                       {"num_heads", {3, 6, 12, 24}},
                       {"window_size", 8},
                       {"pretrained_window_sizes", {0, 0, 0, 0}},
                       {"mlp_ratio", 4.0},
                       {"qkv_bias", true},
                       {"hidden_act", "gelu"},
                       {"layer_norm_eps", 1e-5},
                       {"use_absolute_embeddings", false},
                       {"encoder_stride", 32},
                       {"drop_path_rate", 0.1},
                       {"initializer_range", 0.02},
                       {"num_labels", 1000}};
  std::vector<ArchEntry> archs =
      PooledVisionArchs({"Swinv2", "swinv2", "swinv2."}, swinv2, ScaleSwinv2, Swinv2TrunkFor);
  json mim = WithArchitecture(swinv2, "Swinv2ForMaskedImageModeling");
  mim.erase("num_labels");
  archs.push_back({{"Swinv2ForMaskedImageModeling", "swinv2", "masked-image-modeling"},
                   mim,
                   ScaleSwinv2MaskedImageModeling,
                   BuildSwinv2MaskedImageModeling});
  json backbone = WithArchitecture(swinv2, "Swinv2Backbone");
  backbone.erase("num_labels");
  backbone["out_features"] = {"stage4"};
  backbone["out_indices"] = {4};
  archs.push_back({{"Swinv2Backbone", "swinv2", "backbone"},
                   backbone,
                   ScaleSwinv2Backbone,
                   BuildSwinv2Backbone});
  return archs;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Swinv2, Swinv2Archs);

}  // namespace ts::zoo::internal
