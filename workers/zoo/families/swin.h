// The Swin config reader, tiny scaling and masked-image-modeling builder that swin.cc and
// swinv2.cc share (trunks/vision_swin.h builds both).
#pragma once

#include <cstdint>
#include <memory>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/trunks/vision_swin.h"

namespace ts::zoo::internal {

// The recipe and the classifier's label count.
struct SwinConfig : SwinRecipe {
  int64_t num_labels = 2;
};

// SwinConfig's fields (image_size, patch_size, num_channels, embed_dim, window_size, depths,
// num_heads, mlp_ratio, layer_norm_eps, qkv_bias, hidden_act; use_absolute_embeddings true
// refused); errors name the field.
StatusOr<SwinConfig> ParseSwin(const nlohmann::json& config);
// Two stages (8x8 then 4x4 tokens), window 4, embed_dim 32.
StatusOr<nlohmann::json> ScaleSwin(const nlohmann::json& config);
// *ForMaskedImageModeling's reconstruction is the last stage's map (side image / patch /
// 2^(stages - 1)) upsampled by encoder_stride: it matches pixel_values only for that stride.
Status CheckSwinEncoderStride(const nlohmann::json& config, const SwinConfig& c);
StatusOr<nlohmann::json> ScaleSwinMaskedImageModeling(const nlohmann::json& config);
// The *ForMaskedImageModeling model over a Swin trunk of recipe `c` (its prefix set by the
// caller), with the mask token.
StatusOr<std::unique_ptr<Model>> MakeSwinMaskedImageModel(ModelSpec spec, SwinConfig c);

}  // namespace ts::zoo::internal
