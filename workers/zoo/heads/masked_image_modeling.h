// Masked image modeling (ViTForMaskedImageModeling, DeiTForMaskedImageModeling,
// SwinForMaskedImageModeling): a trunk built with a mask token, its tokens reshaped to a map, the
// decoder (a 1x1 conv to encoder_stride^2 x num_channels, then PixelShuffle(encoder_stride)) and
// the L1 loss on the masked patches.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "workers/zoo/trunks/vision.h"

namespace ts::zoo::internal {

struct MaskedImageModelingRecipe {
  int64_t width = 0;  // the trunk's token width
  // Tokens cut before the reshape (Swin: none): ViT sequence_output[:, 1:] (front 1), DeiT [:,
  // 1:-1] (front 1, back 1: transformers keeps the distillation token and drops the last patch
  // token).
  int64_t drop_front = 1, drop_back = 0;
  int64_t encoder_stride = 16, patch_size = 16, image_size = 224, channels = 3;
};

// Outputs "reconstruction" [B, C, H, W]. Inputs pixel_values and bool_masked_pos (bool [B,
// patches], seeded, about half set). Loss as transformers: l1(pixel_values, reconstruction)
// times the patch mask upsampled to pixels, summed, / (mask.sum() + 1e-5) / num_channels.
// Weights: the trunk's, then decoder.0.weight [stride^2 C, width, 1, 1] and decoder.0.bias.
StatusOr<std::unique_ptr<Model>> MakeMaskedImageModel(ModelSpec spec,
                                                      std::unique_ptr<VisionTrunk> trunk,
                                                      MaskedImageModelingRecipe recipe);

// The config check every *ForMaskedImageModeling class shares: transformers raises when
// bool_masked_pos is given and encoder_stride != patch_size (the reconstruction would not match
// pixel_values). Errors name encoder_stride.
Status CheckEncoderStride(const nlohmann::json& config, int64_t patch_size);

// The tiny config of a *ForMaskedImageModeling class of the ViT trunk (families/vit.cc; DeiT's
// uses it): encoder_stride checked on the real config, then set to the tiny patch size; the
// run's sequence is the patches plus `prefix_tokens`.
StatusOr<nlohmann::json> ScaleVitMaskedImageModeling(const nlohmann::json& config,
                                                     int64_t prefix_tokens);

}  // namespace ts::zoo::internal
