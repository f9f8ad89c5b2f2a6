// ViT: ViTForImageClassification and ViTModel (the base model: no "vit." prefix, with its
// pooler). Config -> recipe (trunks/vision_transformer.h) and the example config.
#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
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

}  // namespace

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
  auto scale = [](const nlohmann::json& c) { return ScaleToTiny(c, "vit"); };
  return {{{"ViTForImageClassification", "vit", "image-classification"}, example, scale, VitBuild},
          {{"ViTModel", "vit", "image-feature-extraction"}, base, scale, VitBuild}};
}

TS_ZOO_REGISTER_FAMILY(Vit, VitArchs);

}  // namespace ts::zoo::internal
