// Swin trunk: patch embedding + LayerNorm, stages of (shifted-)window attention blocks with a
// relative position bias, patch merging between stages, a final LayerNorm; pooler_output is
// the mean over tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workers/zoo/trunks/vision.h"

namespace ts::zoo::internal {

struct SwinRecipe {
  std::string prefix;  // "swin." on the classifier, "" on the base model
  int64_t image_size = 224, patch_size = 4, num_channels = 3, embed_dim = 96, window_size = 7;
  std::vector<int64_t> depths, num_heads;
  double mlp_ratio = 4.0, eps = 1e-5;
  bool qkv_bias = true;
  bool mask_token = false;  // use_mask_token: embeddings.mask_token [1, 1, embed_dim]
  VisionActivation act;
};

class SwinTrunk : public VisionTrunk {
 public:
  explicit SwinTrunk(SwinRecipe recipe);

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override;
  // SwinEmbeddings under bool_masked_pos: the normed patch tokens * (1 - mask) + mask_token *
  // mask.
  VisionFeatures ForwardMasked(const WeightMap& w, const at::Tensor& pixel_values,
                               const at::Tensor& bool_masked_pos) const override;
  std::vector<int64_t> LastHiddenShape() const override;
  int64_t PooledWidth() const override { return dim_; }

 private:
  struct BlockShape {
    int64_t b, res, dim, heads, ws, shift;
  };
  at::Tensor LnSeq(const WeightMap& w, const std::string& p, const at::Tensor& x) const;
  at::Tensor Block(const WeightMap& w, const std::string& bp, const at::Tensor& x,
                   const BlockShape& s) const;
  at::Tensor WindowAttention(const WeightMap& w, const std::string& bp, const at::Tensor& win,
                             const BlockShape& s) const;

  SwinRecipe r_;
  int64_t dim_ = 0;
};

}  // namespace ts::zoo::internal
