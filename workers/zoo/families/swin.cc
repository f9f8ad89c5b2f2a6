// Swin: SwinModel, SwinForImageClassification and SwinForMaskedImageModeling (SwinModel with the
// mask token and without a pooler; the decoder over the last stage's map, whose side times
// encoder_stride must be the image's: heads/masked_image_modeling.h). Config -> recipe
// (trunks/vision_swin.h) and the example config.
#include "workers/zoo/families/swin.h"

#include <algorithm>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/masked_image_modeling.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_swin.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {

using json = nlohmann::json;

StatusOr<SwinConfig> ParseSwin(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  SwinConfig c;
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.patch_size, PositiveInt(r, "patch_size", 4));
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.embed_dim, PositiveInt(r, "embed_dim", 96));
  TS_ASSIGN_OR_RETURN(c.window_size, PositiveInt(r, "window_size", 7));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {2, 2, 6, 2}));
  TS_ASSIGN_OR_RETURN(c.num_heads, IntList(config, "num_heads", {3, 6, 12, 24}));
  TS_RETURN_IF_ERROR(CheckAllPositive("depths", c.depths));
  TS_RETURN_IF_ERROR(CheckAllPositive("num_heads", c.num_heads));
  if (c.depths.empty()) return InvalidArgumentError("depths: must not be empty");
  TS_RETURN_IF_ERROR(CheckLen("num_heads", c.num_heads, c.depths.size()));
  if (c.image_size % c.patch_size != 0) return r.Error("patch_size", "must divide image_size");
  int64_t res = c.image_size / c.patch_size;
  for (size_t i = 0; i < c.depths.size(); ++i) {
    const int64_t dim = c.embed_dim << i;
    if (dim % c.num_heads[i] != 0) {
      return InvalidArgumentError("num_heads: " + std::to_string(c.num_heads[i]) +
                                  " must divide the stage width " + std::to_string(dim));
    }
    // A stage no larger than the window is one window, unshifted (transformers'
    // set_shift_and_window_size); a larger one must split into whole windows (no padding here).
    if (res > c.window_size && res % c.window_size != 0) {
      return r.Error("window_size", "must divide every stage resolution above it (stage " +
                                        std::to_string(i) + ": " + std::to_string(res) + ")");
    }
    if (i + 1 < c.depths.size()) {
      if (res % 2 != 0)
        return r.Error("image_size", "stage resolutions must be even for patch merging");
      res /= 2;
    }
  }
  TS_ASSIGN_OR_RETURN(c.mlp_ratio, r.Double("mlp_ratio", 4.0));
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_eps", 1e-5));
  TS_ASSIGN_OR_RETURN(c.qkv_bias, r.Bool("qkv_bias", true));
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(bool abs_pos, r.Bool("use_absolute_embeddings", false));
  if (abs_pos) return r.Error("use_absolute_embeddings", "not supported");
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleSwin(const json& config) {
  TS_ASSIGN_OR_RETURN(SwinConfig c, ParseSwin(config));
  json t = config;
  // Two stages (8x8 then 4x4 tokens), window 4: stage 0 has a shifted-window block, stage 1's
  // window covers its whole grid (as the real model's last stage).
  const size_t stages = std::min<size_t>(c.depths.size(), 2);
  std::vector<int64_t> depths, heads;
  for (size_t i = 0; i < stages; ++i) {
    depths.push_back(std::min<int64_t>(c.depths[i], 2));
    heads.push_back(int64_t{2} << i);
  }
  t["depths"] = depths;
  t["num_heads"] = heads;
  t["embed_dim"] = 32;
  t["image_size"] = TinyProfile::kImageSize;
  t["patch_size"] = 4;
  t["window_size"] = 4;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 64);
  return t;
}

Status CheckSwinEncoderStride(const json& config, const SwinConfig& c) {
  ConfigReader r(config);
  TS_ASSIGN_OR_RETURN(int64_t stride, r.Int("encoder_stride", 32));
  const int64_t want = c.patch_size << (c.depths.size() - 1);
  if (stride != want)
    return r.Error("encoder_stride",
                   "must be patch_size * 2^(stages - 1) = " + std::to_string(want) +
                       " for masked image modeling, got " + std::to_string(stride));
  return OkStatus();
}

StatusOr<json> ScaleSwinMaskedImageModeling(const json& config) {
  TS_ASSIGN_OR_RETURN(SwinConfig c, ParseSwin(config));
  TS_RETURN_IF_ERROR(CheckSwinEncoderStride(config, c));
  TS_ASSIGN_OR_RETURN(json t, ScaleSwin(config));
  TS_ASSIGN_OR_RETURN(SwinConfig tiny, ParseSwin(t));
  t["encoder_stride"] = tiny.patch_size << (tiny.depths.size() - 1);
  t.erase("num_labels");
  return t;
}

StatusOr<std::unique_ptr<Model>> MakeSwinMaskedImageModel(ModelSpec spec, SwinConfig c) {
  TS_RETURN_IF_ERROR(CheckSwinEncoderStride(spec.tiny_config, c));
  c.mask_token = true;
  auto trunk = std::make_unique<SwinTrunk>(c);
  const int64_t width = trunk->PooledWidth(), stride = c.patch_size << (c.depths.size() - 1);
  return MakeMaskedImageModel(std::move(spec), std::move(trunk),
                              {.width = width,
                               .drop_front = 0,
                               .drop_back = 0,
                               .encoder_stride = stride,
                               .patch_size = c.patch_size,
                               .image_size = c.image_size,
                               .channels = c.num_channels});
}

namespace {

StatusOr<PooledVisionTrunk> SwinTrunkFor(const json& config, const std::string& prefix) {
  TS_ASSIGN_OR_RETURN(SwinConfig c, ParseSwin(config));
  c.prefix = prefix;
  return PooledVisionTrunk{std::make_unique<SwinTrunk>(c), c.num_labels};
}

StatusOr<std::unique_ptr<Model>> BuildSwinMaskedImageModeling(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(SwinConfig c, ParseSwin(spec.tiny_config));
  c.prefix = "swin.";
  return MakeSwinMaskedImageModel(std::move(spec), std::move(c));
}

}  // namespace

std::vector<ArchEntry> SwinArchs() {
  // Modelled on microsoft/swin-tiny-patch4-window7-224.
  const json swin = {{"model_type", "swin"},
                     {"image_size", 224},
                     {"patch_size", 4},
                     {"num_channels", 3},
                     {"embed_dim", 96},
                     {"depths", {2, 2, 6, 2}},
                     {"num_heads", {3, 6, 12, 24}},
                     {"window_size", 7},
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
      PooledVisionArchs({"Swin", "swin", "swin."}, swin, ScaleSwin, SwinTrunkFor);
  // microsoft/swin-base-simmim-window6-192's layout at swin-tiny's sizes: the pre-training class.
  json mim = WithArchitecture(swin, "SwinForMaskedImageModeling");
  mim.erase("num_labels");
  archs.push_back({{"SwinForMaskedImageModeling", "swin", "masked-image-modeling"},
                   mim,
                   ScaleSwinMaskedImageModeling,
                   BuildSwinMaskedImageModeling});
  return archs;
}

TS_ZOO_REGISTER_FAMILY(Swin, SwinArchs);

}  // namespace ts::zoo::internal
