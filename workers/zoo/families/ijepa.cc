// I-JEPA (modular_ijepa.py): ViT (trunks/vision_transformer.h) without the cls token
// (IJepaEmbeddings deletes it; position_embeddings cover the patches only). IJepaModel is
// ViTModel with add_pooling_layer false: last_hidden_state alone. IJepaForImageClassification
// holds the model as `ijepa.` and classifies the mean of the final layernorm's tokens. Config:
// ViT's fields (config.h VitConfig); pooler_output_size / pooler_act are read by no module.
#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_transformer.h"

namespace ts::zoo::internal {
namespace {

StatusOr<std::unique_ptr<Model>> IJepaBuild(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(VitConfig c, ParseVitConfig(spec.tiny_config));
  const bool base = spec.arch == "IJepaModel";
  VitRecipe recipe = VitRecipeFromConfig(c, base ? "" : "ijepa.", false);
  recipe.cls_token = false;
  auto trunk = std::make_unique<VitTrunk>(std::move(recipe));
  std::unique_ptr<ImageHead> head;
  if (base) {
    head = VisionHeadFor(VisionHeadKind::kFeatures, *trunk, /*num_labels=*/0);
  } else {
    head = ImageClassificationHead({.prefix = "classifier.",
                                    .num_labels = c.num_labels,
                                    .width = c.hidden_size,
                                    .flatten = false,
                                    .mean_patches = true,
                                    .prefix_tokens = 0});
  }
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

StatusOr<nlohmann::json> ScaleIJepa(const nlohmann::json& config) {
  TS_ASSIGN_OR_RETURN(nlohmann::json t, ScaleToTiny(config, "vit"));
  const int64_t grid = TinyProfile::kImageSize / TinyProfile::kPatchSize;
  SetTinyRunProfile(t, grid * grid);
  return t;
}

std::vector<ArchEntry> IJepaArchs() {
  // facebook/ijepa_vith14_1k (ViT-H/14).
  const nlohmann::json base = {{"architectures", {"IJepaModel"}},
                               {"model_type", "ijepa"},
                               {"hidden_size", 1280},
                               {"intermediate_size", 5120},
                               {"num_attention_heads", 16},
                               {"num_hidden_layers", 32},
                               {"image_size", 224},
                               {"patch_size", 14},
                               {"num_channels", 3},
                               {"hidden_act", "gelu"},
                               {"layer_norm_eps", 1e-6},
                               {"qkv_bias", true}};
  nlohmann::json classifier = base;
  classifier["architectures"] = {"IJepaForImageClassification"};
  classifier["num_labels"] = 1000;
  return {{{"IJepaForImageClassification", "ijepa", "image-classification"},
           classifier,
           ScaleIJepa,
           IJepaBuild},
          {{"IJepaModel", "ijepa", "image-feature-extraction"}, base, ScaleIJepa, IJepaBuild}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(IJepa, IJepaArchs);

}  // namespace ts::zoo::internal
