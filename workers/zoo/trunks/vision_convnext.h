// ConvNeXt trunk: a patchify conv + channel LayerNorm stem, stages of depthwise 7x7 conv,
// LayerNorm, pointwise MLP (ConvNeXt V2: with GRN) and layer scale, a LayerNorm + 2x2 conv
// downsampling between stages, and a LayerNorm over the global average (pooler_output).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workers/zoo/trunks/vision.h"

namespace ts::zoo::internal {

struct ConvNextRecipe {
  std::string prefix;  // "convnext." on the classifier, "" on the base model
  int64_t num_channels = 3, patch_size = 4, image_size = 224;
  std::vector<int64_t> hidden_sizes, depths;
  VisionActivation act;
  double layer_norm_eps = 1e-12;         // the final LayerNorm (the others use 1e-6, as HF)
  double layer_scale_init_value = 1e-6;  // > 0: layer_scale_parameter per block
  // ConvNeXt V2's global response normalization after the activation (ConvNextV2GRN):
  // x + grn.weight * (x * N) + grn.bias, N = ||x||_HW / (mean_C ||x||_HW + 1e-6).
  bool grn = false;
  // The final LayerNorm of the pooled features (`layernorm`); ConvNextBackbone has none.
  bool final_layernorm = true;
};

class ConvNextTrunk : public VisionTrunk {
 public:
  explicit ConvNextTrunk(ConvNextRecipe recipe);

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override;
  std::vector<int64_t> LastHiddenShape() const override;
  int64_t PooledWidth() const override { return r_.hidden_sizes.back(); }

 private:
  ConvNextRecipe r_;
  int64_t hw_ = 1;
};

}  // namespace ts::zoo::internal
