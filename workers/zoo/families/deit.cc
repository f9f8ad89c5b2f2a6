// DeiT: DeiTModel, DeiTForImageClassification, DeiTForImageClassificationWithTeacher and
// DeiTForMaskedImageModeling (the decoder over sequence_output[:, 1:-1], as transformers cuts
// it): the ViT trunk with a distillation token. Config -> recipe and the example config.
#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/heads/masked_image_modeling.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_transformer.h"

namespace ts::zoo::internal {
namespace {

enum class DeitHead { kBase, kClassifier, kWithTeacher, kMaskedImageModeling };

StatusOr<nlohmann::json> ScaleDeit(const nlohmann::json& config) {
  TS_ASSIGN_OR_RETURN(nlohmann::json t, ScaleToTiny(config, "vit"));
  const int64_t grid = TinyProfile::kImageSize / TinyProfile::kPatchSize;
  SetTinyRunProfile(t, grid * grid + 2);
  return t;
}

decltype(ArchEntry::build) DeitBuild(DeitHead kind) {
  return [kind](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(VitConfig c, ParseVitConfig(spec.tiny_config));
    const bool base = kind == DeitHead::kBase;
    if (kind == DeitHead::kMaskedImageModeling) {
      TS_RETURN_IF_ERROR(CheckEncoderStride(spec.tiny_config, c.patch_size));
      VitRecipe recipe = VitRecipeFromConfig(c, "deit.", true);
      recipe.mask_token = true;
      return MakeMaskedImageModel(std::move(spec), std::make_unique<VitTrunk>(std::move(recipe)),
                                  {.width = c.hidden_size,
                                   .drop_front = 1,
                                   .drop_back = 1,
                                   .encoder_stride = c.patch_size,
                                   .patch_size = c.patch_size,
                                   .image_size = c.image_size,
                                   .channels = c.num_channels});
    }
    auto trunk = std::make_unique<VitTrunk>(VitRecipeFromConfig(c, base ? "" : "deit.", true));
    std::unique_ptr<ImageHead> head;
    if (base) {
      head = ImageFeaturesHead({/*tanh_pooler=*/true, c.hidden_size,
                                FeatureLoss::kTargetAndZeroPooled, trunk->LastHiddenShape()});
    } else if (kind == DeitHead::kClassifier) {
      head = ImageClassificationHead({"classifier.", c.num_labels, c.hidden_size,
                                      /*flatten=*/false});
    } else {
      head = DistilledImageClassificationHead(c.num_labels, c.hidden_size);
    }
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
  };
}

}  // namespace

std::vector<ArchEntry> DeitArchs() {
  // Modelled on facebook/deit-base-distilled-patch16-224.
  const nlohmann::json deit = {
      {"model_type", "deit"},      {"hidden_size", 768},      {"intermediate_size", 3072},
      {"num_attention_heads", 12}, {"num_hidden_layers", 12}, {"image_size", 224},
      {"patch_size", 16},          {"num_channels", 3},       {"hidden_act", "gelu"},
      {"layer_norm_eps", 1e-12},   {"qkv_bias", true},        {"encoder_stride", 16},
      {"initializer_range", 0.02}, {"num_labels", 1000}};
  nlohmann::json mim = deit;
  mim.erase("num_labels");
  return {{{"DeiTModel", "deit", "image-feature-extraction"},
           WithArchitecture(deit, "DeiTModel"),
           ScaleDeit,
           DeitBuild(DeitHead::kBase)},
          {{"DeiTForImageClassification", "deit", "image-classification"},
           WithArchitecture(deit, "DeiTForImageClassification"),
           ScaleDeit,
           DeitBuild(DeitHead::kClassifier)},
          {{"DeiTForImageClassificationWithTeacher", "deit", "image-classification"},
           WithArchitecture(deit, "DeiTForImageClassificationWithTeacher"),
           ScaleDeit,
           DeitBuild(DeitHead::kWithTeacher)},
          {{"DeiTForMaskedImageModeling", "deit", "masked-image-modeling"},
           WithArchitecture(mim, "DeiTForMaskedImageModeling"),
           [](const nlohmann::json& c) { return ScaleVitMaskedImageModeling(c, 2); },
           DeitBuild(DeitHead::kMaskedImageModeling)}};
}

TS_ZOO_REGISTER_FAMILY(Deit, DeitArchs);

}  // namespace ts::zoo::internal
