// dinov2 (modular_dinov2.py; dinov2_with_registers.cc derives from it): Dinov2Model
// (last_hidden_state after the final LayerNorm, pooler_output its token 0),
// Dinov2ForImageClassification (`classifier` [labels, 2 hidden] over cat(token 0, the mean of the
// patch tokens)) and Dinov2Backbone (the last stage's layer-normed patch tokens as a map: the
// default out_features; others, apply_layernorm and reshape_hidden_states false are refused). The
// embeddings' mask_token [1, hidden] (use_mask_token, default true) is only read under
// bool_masked_pos, which these classes never get: it is in the state_dict, not among the
// weights. Config: hidden_size, num_hidden_layers, num_attention_heads, mlp_ratio (4),
// hidden_act, layer_norm_eps (1e-6), image_size, patch_size, num_channels, qkv_bias,
// use_swiglu_ffn; layerscale_value only sets lambda1's init.
#include "workers/zoo/families/dinov2.h"

#include <algorithm>

#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct Dinov2Config {
  Dinov2Recipe recipe;
  int64_t num_labels = 2;
};

StatusOr<Dinov2Config> ParseDinov2(const json& config, const Dinov2Family& fam) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  Dinov2Config c;
  Dinov2Recipe& d = c.recipe;
  TS_ASSIGN_OR_RETURN(d.hidden, PositiveInt(r, "hidden_size", 768));
  TS_ASSIGN_OR_RETURN(d.layers, PositiveInt(r, "num_hidden_layers", 12));
  TS_ASSIGN_OR_RETURN(d.heads, PositiveInt(r, "num_attention_heads", 12));
  if (d.hidden % d.heads != 0) return r.Error("num_attention_heads", "must divide hidden_size");
  TS_ASSIGN_OR_RETURN(d.mlp_ratio, r.Double("mlp_ratio", 4.0));
  if (!(d.mlp_ratio > 0)) return r.Error("mlp_ratio", "must be positive");
  TS_ASSIGN_OR_RETURN(std::string act, r.String("hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(d.act, ParseActivation(act, "hidden_act"));
  TS_ASSIGN_OR_RETURN(d.eps, r.Double("layer_norm_eps", 1e-6));
  if (!(d.eps > 0)) return r.Error("layer_norm_eps", "must be positive");
  TS_ASSIGN_OR_RETURN(d.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(d.patch_size, PositiveInt(r, "patch_size", 14));
  if (d.image_size % d.patch_size != 0) return r.Error("patch_size", "must divide image_size");
  TS_ASSIGN_OR_RETURN(d.channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(d.qkv_bias, r.Bool("qkv_bias", true));
  TS_ASSIGN_OR_RETURN(d.swiglu, r.Bool("use_swiglu_ffn", false));
  if (fam.registers) {
    TS_ASSIGN_OR_RETURN(d.registers, r.Int("num_register_tokens", 4));
    if (d.registers < 0) return r.Error("num_register_tokens", "must not be negative");
  }
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

// The backbone fields only *Backbone reads: the last stage, layer-normed, reshaped.
Status CheckBackbone(const json& config, int64_t layers) {
  ConfigReader r(config);
  TS_ASSIGN_OR_RETURN(bool ln, r.Bool("apply_layernorm", true));
  if (!ln) return r.Error("apply_layernorm", "false is not supported by the zoo");
  TS_ASSIGN_OR_RETURN(bool reshape, r.Bool("reshape_hidden_states", true));
  if (!reshape) return r.Error("reshape_hidden_states", "false is not supported by the zoo");
  return CheckLastStageBackbone(config, layers);
}

// `backbone`: the class reads the backbone fields (checked on the real config).
StatusOr<json> ScaleDinov2(const json& config, const Dinov2Family& fam, bool backbone) {
  TS_ASSIGN_OR_RETURN(Dinov2Config c, ParseDinov2(config, fam));
  if (backbone) TS_RETURN_IF_ERROR(CheckBackbone(config, c.recipe.layers));
  json t = config;
  const int64_t heads = std::min<int64_t>(c.recipe.heads, TinyProfile::kHeads);
  t["num_attention_heads"] = heads;
  t["hidden_size"] = heads * (TinyProfile::kHidden / TinyProfile::kHeads);
  t["num_hidden_layers"] = TinyDepth(c.recipe.layers, false);
  t["image_size"] = TinyProfile::kImageSize;
  t["patch_size"] = TinyProfile::kPatchSize;
  // A backbone's last stage is the tiny depth's.
  if (t.contains("out_features"))
    t["out_features"] = {"stage" + std::to_string(t["num_hidden_layers"].get<int64_t>())};
  if (t.contains("out_indices")) t["out_indices"] = {t["num_hidden_layers"]};
  if (t.contains("stage_names")) t.erase("stage_names");
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

enum class Dinov2Head { kModel, kClassification, kBackbone };

StatusOr<std::unique_ptr<Model>> BuildDinov2(ModelSpec spec, const Dinov2Family& fam,
                                             Dinov2Head head) {
  TS_ASSIGN_OR_RETURN(Dinov2Config c, ParseDinov2(spec.tiny_config, fam));
  if (head == Dinov2Head::kBackbone)
    TS_RETURN_IF_ERROR(CheckBackbone(spec.tiny_config, c.recipe.layers));
  if (head == Dinov2Head::kClassification) c.recipe.prefix = fam.base;
  const int64_t prefix_tokens = 1 + c.recipe.registers, grid = c.recipe.Grid();
  auto trunk = std::make_unique<Dinov2Trunk>(c.recipe);
  std::unique_ptr<ImageHead> h;
  switch (head) {
    case Dinov2Head::kModel:
      h = ImageFeaturesHead({.tanh_pooler = false,
                             .width = c.recipe.hidden,
                             .loss = FeatureLoss::kTargetAndZeroPooled,
                             .last_hidden_shape = trunk->LastHiddenShape()});
      break;
    case Dinov2Head::kClassification:
      h = ImageClassificationHead({.prefix = "classifier.",
                                   .num_labels = c.num_labels,
                                   .width = 2 * c.recipe.hidden,
                                   .flatten = false,
                                   .cls_and_mean = true,
                                   .prefix_tokens = prefix_tokens});
      break;
    case Dinov2Head::kBackbone:
      h = BackboneHead({.prefix_tokens = prefix_tokens,
                        .grid = grid,
                        .map_shape = {c.recipe.hidden, grid, grid}});
      break;
  }
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(h));
}

// The embeddings' mask_token [1, hidden] under the model's prefix.
void AddMaskToken(StateDictBuilder& sd) {
  for (const auto& [n, s] : sd.weights()) {
    const std::string suffix = "embeddings.cls_token";
    if (n.size() >= suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      sd.AddUnused(n.substr(0, n.size() - std::string("cls_token").size()) + "mask_token",
                   {1, s.back()});
  }
}

}  // namespace

std::vector<ArchEntry> Dinov2Archs(const Dinov2Family& fam, const json& example) {
  std::vector<ArchEntry> out;
  const std::pair<Dinov2Head, std::string> heads[] = {
      {Dinov2Head::kModel, "Model"},
      {Dinov2Head::kClassification, "ForImageClassification"},
      {Dinov2Head::kBackbone, "Backbone"}};
  for (const auto& [head, suffix] : heads) {
    const std::string arch = fam.prefix + suffix;
    json cfg = WithArchitecture(example, arch);
    cfg["model_type"] = fam.model_type;
    if (head != Dinov2Head::kClassification) cfg.erase("num_labels");
    const char* task = head == Dinov2Head::kModel            ? "image-feature-extraction"
                       : head == Dinov2Head::kClassification ? "image-classification"
                                                             : "backbone";
    ArchEntry e;
    e.info = {arch, fam.model_type, task};
    e.example_config = std::move(cfg);
    e.scale = [fam, backbone = head == Dinov2Head::kBackbone](const json& c) {
      return ScaleDinov2(c, fam, backbone);
    };
    e.build = [fam, head = head](ModelSpec spec) {
      return BuildDinov2(std::move(spec), fam, head);
    };
    e.state_dict.extra = AddMaskToken;
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

std::vector<ArchEntry> Dinov2FamilyArchs() {
  // facebook/dinov2-base (the classifier: facebook/dinov2-base-imagenet1k-1-layer's 1000 labels)
  const json example = {
      {"model_type", "dinov2"},    {"hidden_size", 768},      {"num_hidden_layers", 12},
      {"num_attention_heads", 12}, {"mlp_ratio", 4},          {"hidden_act", "gelu"},
      {"layer_norm_eps", 1e-6},    {"image_size", 518},       {"patch_size", 14},
      {"num_channels", 3},         {"qkv_bias", true},        {"layerscale_value", 1.0},
      {"drop_path_rate", 0.0},     {"use_swiglu_ffn", false}, {"num_labels", 1000}};
  return Dinov2Archs({"dinov2", "Dinov2", "dinov2.", false}, example);
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Dinov2, Dinov2FamilyArchs);

}  // namespace ts::zoo::internal
