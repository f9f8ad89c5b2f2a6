// ViT-MSN (modular_vit_msn.py): ViTModel without its pooler (`del self.pooler`), so
// ViTMSNModel returns last_hidden_state alone; ViTMSNForImageClassification is ViT's classifier
// on token 0 after the final layernorm, the model under `vit.`; ViTMSNConfig's layer_norm_eps
// defaults to 1e-6 (ViT's to 1e-12).
#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_transformer.h"

namespace ts::zoo::internal {
namespace {

nlohmann::json WithMsnDefaults(nlohmann::json c) {
  if (c.is_object() && (!c.contains("layer_norm_eps") || c["layer_norm_eps"].is_null()))
    c["layer_norm_eps"] = 1e-6;
  return c;
}

StatusOr<std::unique_ptr<Model>> VitMsnBuild(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(VitConfig c, ParseVitConfig(WithMsnDefaults(spec.tiny_config)));
  const VisionHeadKind kind = VisionHeadKindOf(spec.arch);
  const bool classifier = kind == VisionHeadKind::kClassification;
  auto trunk = std::make_unique<VitTrunk>(VitRecipeFromConfig(c, classifier ? "vit." : "", false));
  auto head = VisionHeadFor(kind, *trunk, c.num_labels);
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

}  // namespace

std::vector<ArchEntry> VitMsnArchs() {
  // facebook/vit-msn-small (ViT-S/16: width 384, 6 heads).
  const nlohmann::json example = {{"architectures", {"ViTMSNForImageClassification"}},
                                  {"model_type", "vit_msn"},
                                  {"hidden_size", 384},
                                  {"intermediate_size", 1536},
                                  {"num_attention_heads", 6},
                                  {"num_hidden_layers", 12},
                                  {"image_size", 224},
                                  {"patch_size", 16},
                                  {"num_channels", 3},
                                  {"hidden_act", "gelu"},
                                  {"layer_norm_eps", 1e-6},
                                  {"qkv_bias", true},
                                  {"num_labels", 1000}};
  nlohmann::json base = example;
  base["architectures"] = {"ViTMSNModel"};
  base.erase("num_labels");
  auto scale = [](const nlohmann::json& c) { return ScaleToTiny(WithMsnDefaults(c), "vit"); };
  return {{{"ViTMSNForImageClassification", "vit_msn", "image-classification"}, example, scale,
           VitMsnBuild},
          {{"ViTMSNModel", "vit_msn", "image-feature-extraction"}, base, scale, VitMsnBuild}};
}

TS_ZOO_REGISTER_FAMILY(VitMsn, VitMsnArchs);

}  // namespace ts::zoo::internal
