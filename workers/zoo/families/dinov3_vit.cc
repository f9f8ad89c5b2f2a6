// dinov3_vit (modular_dinov3_vit.py, configuration_dinov3_vit.py): DINOv3ViTModel on the DINOv3
// trunk (trunks/vision_dinov3.h), last_hidden_state and pooler_output (token 0 after the final
// norm). Config: ViT's size fields (layer_norm_eps 1e-5 by default), num_register_tokens,
// rope_theta, query_bias / key_bias / value_bias / proj_bias / mlp_bias, use_gated_mlp,
// layerscale_value (init only); pos_embed_shift / jitter / rescale act in training mode only
// (trunks/vision_dinov3.h). The embeddings' mask_token (read under bool_masked_pos only) is a
// state_dict entry, not a weight. DINOv3ViTBackbone is not built (FIDELITY.md).
#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/state_dict.h"
#include "workers/zoo/trunks/vision_dinov3.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

json WithDinov3Defaults(json c) {
  if (c.is_object() && (!c.contains("layer_norm_eps") || c["layer_norm_eps"].is_null()))
    c["layer_norm_eps"] = 1e-5;
  return c;
}

StatusOr<Dinov3VitRecipe> ParseDinov3Vit(const json& config) {
  TS_ASSIGN_OR_RETURN(VitConfig v, ParseVitConfig(WithDinov3Defaults(config)));
  ConfigReader r(config);
  Dinov3VitRecipe d;
  d.image_size = v.image_size;
  d.patch_size = v.patch_size;
  d.channels = v.num_channels;
  d.hidden = v.hidden_size;
  d.intermediate = v.intermediate_size;
  d.layers = v.num_hidden_layers;
  d.heads = v.num_attention_heads;
  d.act = v.hidden_act;
  d.eps = v.layer_norm_eps;
  if ((d.hidden / d.heads) % 4 != 0) {
    return r.Error("num_attention_heads",
                   "the head size hidden_size / num_attention_heads must be a multiple of 4 (the "
                   "2D rotary's quarters), got " +
                       std::to_string(d.hidden / d.heads));
  }
  TS_ASSIGN_OR_RETURN(d.registers, r.Int("num_register_tokens", 0));
  if (d.registers < 0) return r.Error("num_register_tokens", "must be >= 0");
  TS_ASSIGN_OR_RETURN(d.rope_theta, r.Double("rope_theta", 100.0));
  if (d.rope_theta <= 0) return r.Error("rope_theta", "must be > 0");
  TS_ASSIGN_OR_RETURN(d.query_bias, r.Bool("query_bias", true));
  TS_ASSIGN_OR_RETURN(d.key_bias, r.Bool("key_bias", false));
  TS_ASSIGN_OR_RETURN(d.value_bias, r.Bool("value_bias", true));
  TS_ASSIGN_OR_RETURN(d.proj_bias, r.Bool("proj_bias", true));
  TS_ASSIGN_OR_RETURN(d.mlp_bias, r.Bool("mlp_bias", true));
  TS_ASSIGN_OR_RETURN(d.gated_mlp, r.Bool("use_gated_mlp", false));
  TS_RETURN_IF_ERROR(r.Double("layerscale_value", 1.0).status());
  return d;
}

StatusOr<json> ScaleDinov3Vit(const json& config) {
  TS_RETURN_IF_ERROR(ParseDinov3Vit(config).status());
  TS_ASSIGN_OR_RETURN(json t, ScaleToTiny(WithDinov3Defaults(config), "vit"));
  TS_ASSIGN_OR_RETURN(Dinov3VitRecipe d, ParseDinov3Vit(t));
  SetTinyRunProfile(t, 1 + d.registers + d.Grid() * d.Grid());
  return t;
}

StatusOr<std::unique_ptr<Model>> BuildDinov3Vit(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(Dinov3VitRecipe d, ParseDinov3Vit(spec.tiny_config));
  auto trunk = std::make_unique<Dinov3VitTrunk>(d);
  auto head = ImageFeaturesHead({.tanh_pooler = false,
                                 .width = d.hidden,
                                 .loss = FeatureLoss::kTargetAndZeroPooled,
                                 .last_hidden_shape = trunk->LastHiddenShape()});
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

// DINOv3ViTEmbeddings' mask_token [1, 1, hidden], and its register_tokens [1, 0, hidden] when
// there are none (an empty parameter transformers still holds).
void AddDinov3Embeddings(StateDictBuilder& sd) {
  const auto& weights = sd.weights();
  if (!weights.count("embeddings.cls_token")) return;
  const int64_t h = weights.at("embeddings.cls_token").back();
  if (!weights.count("embeddings.register_tokens")) {
    sd.AddUnused("embeddings.register_tokens", {1, 0, h});
  }
  sd.AddUnused("embeddings.mask_token", {1, 1, h});
}

std::vector<ArchEntry> Dinov3VitArchs() {
  // facebook/dinov3-vits16-pretrain-lvd1689m (ViT-S/16 with 4 registers).
  const json example = {{"architectures", {"DINOv3ViTModel"}},
                        {"model_type", "dinov3_vit"},
                        {"hidden_size", 384},
                        {"intermediate_size", 1536},
                        {"num_attention_heads", 6},
                        {"num_hidden_layers", 12},
                        {"hidden_act", "gelu"},
                        {"layer_norm_eps", 1e-5},
                        {"image_size", 224},
                        {"patch_size", 16},
                        {"num_channels", 3},
                        {"num_register_tokens", 4},
                        {"rope_theta", 100.0},
                        {"query_bias", true},
                        {"key_bias", false},
                        {"value_bias", true},
                        {"proj_bias", true},
                        {"mlp_bias", true},
                        {"use_gated_mlp", false},
                        {"layerscale_value", 1.0},
                        {"drop_path_rate", 0.0},
                        {"pos_embed_shift", nullptr},
                        {"pos_embed_jitter", nullptr},
                        {"pos_embed_rescale", 2.0},
                        {"initializer_range", 0.02}};
  ArchEntry e{{"DINOv3ViTModel", "dinov3_vit", "image-feature-extraction"},
              example,
              ScaleDinov3Vit,
              BuildDinov3Vit};
  e.state_dict.extra = AddDinov3Embeddings;
  return {e};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Dinov3Vit, Dinov3VitArchs);

}  // namespace ts::zoo::internal
