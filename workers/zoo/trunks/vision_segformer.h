// The SegFormer trunk (modeling_segformer.py SegformerEncoder, the Mix Transformer): per stage an
// overlapping patch embedding (a conv of kernel patch_sizes[i], stride strides[i], padding
// kernel // 2, then a LayerNorm), depths[i] pre-LN layers of efficient self-attention (keys and
// values from the tokens reduced by a conv of kernel and stride sr_ratios[i] and a LayerNorm when
// sr_ratios[i] > 1) and a Mix-FFN (dense1, a 3x3 depthwise conv over the map, the activation,
// dense2), then the stage's LayerNorm and the tokens reshaped to a map (reshape_last_stage). Every
// LayerNorm is nn.LayerNorm's default eps 1e-5: transformers never reads layer_norm_eps here.
// Weights under `prefix` + "encoder.": patch_embeddings.I.{proj,layer_norm},
// block.I.J.{layer_norm_1, attention.self.{query,key,value,sr,layer_norm}, attention.output.dense,
// layer_norm_2, mlp.{dense1, dwconv.dwconv, dense2}}, layer_norm.I.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/trunks/vision.h"

namespace ts::zoo::internal {

struct SegformerRecipe {
  std::string prefix;  // "segformer." on the heads, "" on SegformerModel
  int64_t channels = 3, image_size = 224;
  // Per stage (num_encoder_blocks entries each).
  std::vector<int64_t> depths, sr_ratios, hidden_sizes, patch_sizes, strides, heads;
  std::vector<double> mlp_ratios;
  Activation act = Activation::kGeluErf;

  int64_t stages() const { return static_cast<int64_t>(depths.size()); }
  // The side of stage i's map for an image of `image_size` (the patch convs' output sizes).
  int64_t MapSide(int64_t stage) const;
};

// last_hidden_state = the last stage's map [B, C, H, W]; pooled = its tokens' mean [B, C]
// (SegformerForImageClassification's global average pooling); stages = every stage's map.
class SegformerTrunk : public VisionTrunk {
 public:
  explicit SegformerTrunk(SegformerRecipe recipe);

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override;
  std::vector<int64_t> LastHiddenShape() const override;
  int64_t PooledWidth() const override { return r_.hidden_sizes.back(); }
  const SegformerRecipe& recipe() const { return r_; }

 private:
  at::Tensor Layer(const WeightMap& w, int64_t stage, int64_t layer, at::Tensor x, int64_t height,
                   int64_t width) const;

  SegformerRecipe r_;
};

}  // namespace ts::zoo::internal
