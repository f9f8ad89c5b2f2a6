// ViT: ViTForImageClassification, ViTModel (the base model: no "vit." prefix, with its
// pooler) and ViTForMaskedImageModeling (ViTModel without the pooler, with the mask token; the
// decoder over sequence_output[:, 1:]: heads/masked_image_modeling.h). Config -> recipe
// (trunks/vision_transformer.h) and the example config.
#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/heads/masked_image_modeling.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_transformer.h"

namespace ts::zoo::internal {
namespace {

StatusOr<std::unique_ptr<Model>> VitBuild(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(VitConfig c, ParseVitConfig(spec.tiny_config));
  const bool base = spec.arch == "ViTModel";
  auto trunk = std::make_unique<VitTrunk>(VitRecipeFromConfig(c, base ? "" : "vit.", false));
  std::unique_ptr<ImageHead> head =
      base ? ImageFeaturesHead({/*tanh_pooler=*/true, c.hidden_size,
                                FeatureLoss::kSequenceAndFirstToken, trunk->LastHiddenShape()})
           : ImageClassificationHead({"classifier.", c.num_labels, c.hidden_size,
                                      /*flatten=*/false});
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

StatusOr<std::unique_ptr<Model>> VitMaskedImageModelingBuild(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(VitConfig c, ParseVitConfig(spec.tiny_config));
  TS_RETURN_IF_ERROR(CheckEncoderStride(spec.tiny_config, c.patch_size));
  VitRecipe recipe = VitRecipeFromConfig(c, "vit.", false);
  recipe.mask_token = true;
  return MakeMaskedImageModel(std::move(spec), std::make_unique<VitTrunk>(std::move(recipe)),
                              {.width = c.hidden_size,
                               .drop_front = 1,
                               .drop_back = 0,
                               .encoder_stride = c.patch_size,
                               .patch_size = c.patch_size,
                               .image_size = c.image_size,
                               .channels = c.num_channels});
}

}  // namespace

// The tiny config of a *ForMaskedImageModeling class of the ViT trunk: encoder_stride checked
// on the real config, then set to the tiny patch size.
StatusOr<nlohmann::json> ScaleVitMaskedImageModeling(const nlohmann::json& config,
                                                     int64_t prefix_tokens) {
  TS_ASSIGN_OR_RETURN(VitConfig c, ParseVitConfig(config));
  TS_RETURN_IF_ERROR(CheckEncoderStride(config, c.patch_size));
  TS_ASSIGN_OR_RETURN(nlohmann::json t, ScaleToTiny(config, "vit"));
  t["encoder_stride"] = TinyProfile::kPatchSize;
  t.erase("num_labels");
  t.erase("id2label");
  t.erase("label2id");
  const int64_t grid = TinyProfile::kImageSize / TinyProfile::kPatchSize;
  SetTinyRunProfile(t, grid * grid + prefix_tokens);
  return t;
}

std::vector<ArchEntry> VitArchs() {
  // Example modelled on google/vit-base-patch16-224.
  const nlohmann::json example = {{"architectures", {"ViTForImageClassification"}},
                                  {"model_type", "vit"},
                                  {"hidden_size", 768},
                                  {"intermediate_size", 3072},
                                  {"num_attention_heads", 12},
                                  {"num_hidden_layers", 12},
                                  {"image_size", 224},
                                  {"patch_size", 16},
                                  {"num_channels", 3},
                                  {"hidden_act", "gelu"},
                                  {"layer_norm_eps", 1e-12},
                                  {"qkv_bias", true},
                                  {"num_labels", 1000}};
  nlohmann::json base = example;  // google/vit-base-patch16-224-in21k
  base["architectures"] = {"ViTModel"};
  base.erase("num_labels");
  nlohmann::json mim = base;  // google/vit-base-patch16-224-in21k's sizes
  mim["architectures"] = {"ViTForMaskedImageModeling"};
  mim["encoder_stride"] = 16;
  auto scale = [](const nlohmann::json& c) { return ScaleToTiny(c, "vit"); };
  return {{{"ViTForImageClassification", "vit", "image-classification"}, example, scale, VitBuild},
          {{"ViTModel", "vit", "image-feature-extraction"}, base, scale, VitBuild},
          {{"ViTForMaskedImageModeling", "vit", "masked-image-modeling"},
           mim,
           [](const nlohmann::json& c) { return ScaleVitMaskedImageModeling(c, 1); },
           VitMaskedImageModelingBuild}};
}

TS_ZOO_REGISTER_FAMILY(Vit, VitArchs);

}  // namespace ts::zoo::internal
