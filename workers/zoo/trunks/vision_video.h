// The video trunks: VideoMAE and ViViT (VideoMaeTrunk), TimeSformer (TimesformerTrunk). VideoMAE
// (modeling_videomae.py VideoMAEModel): a Conv3d tubelet embedding of pixel_values [B, frames, C,
// H, W] (permuted to [B, C, frames, H, W]; kernel and stride (tubelet_size, patch_size,
// patch_size)), the fixed sinusoid position table (not a parameter: computed in the forward, as
// transformers' get_sinusoid_encoding_table), the ViT-style pre-LN encoder with bias-free
// query/key/value and the q_bias / v_bias parameters, then either the final `layernorm`
// (use_mean_pooling false) or none. Weights under `prefix`: embeddings.
// patch_embeddings.projection, encoder.layer.N.{layernorm_before, attention.attention.{query,
// key,value,q_bias,v_bias}, attention.output.dense, layernorm_after, intermediate.dense,
// output.dense}. ViViT (modeling_vivit.py VivitModel): the same tubelet conv and layer names with
// ordinary q/k/v biases, a cls token and learned positions, and the final `layernorm`.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "workers/zoo/trunks/vision_transformer.h"

namespace ts::zoo::internal {

struct VideoMaeRecipe {
  std::string prefix;  // "videomae." / "vivit." on the classifier, "" on the base models
  int64_t image_size = 224, patch_size = 16, channels = 3, frames = 16, tubelet = 2;
  // ViViT (modeling_vivit.py): `embeddings.cls_token` before the tubelets and learned
  // `embeddings.position_embeddings` [1, 1 + tubelets, hidden] instead of the sinusoid table;
  // the final `layernorm` always; pooled = token 0.
  bool vivit = false;
  bool mean_pooling = true;
  // VideoMAEForVideoClassification: `fc_norm` (nn.LayerNorm's default eps 1e-5) over the tokens'
  // mean when mean_pooling; else the pooled features are token 0 after `layernorm`.
  bool fc_norm = false;
  PreLnEncoderRecipe encoder;

  int64_t Tokens() const {
    return (frames / tubelet) * (image_size / patch_size) * (image_size / patch_size) +
           (vivit ? 1 : 0);
  }
};

// last_hidden_state [B, tokens, hidden]; pooled as VideoMAEForVideoClassification reads it.
class VideoMaeTrunk : public VisionTrunk {
 public:
  explicit VideoMaeTrunk(VideoMaeRecipe recipe);

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override;
  // VideoMAE under bool_masked_pos [B, tubelets] (VideoMAEForPreTraining): the encoder runs on
  // the visible tubelets only.
  VisionFeatures ForwardMasked(const WeightMap& w, const at::Tensor& pixel_values,
                               const at::Tensor& bool_masked_pos) const override;
  std::vector<int64_t> PixelValuesShape() const override;
  std::vector<int64_t> LastHiddenShape() const override;
  int64_t PooledWidth() const override { return r_.encoder.hidden; }
  const VideoMaeRecipe& recipe() const { return r_; }

 private:
  VideoMaeRecipe r_;
  std::optional<PreLnEncoder> encoder_;
};

// The TimeSformer trunk (modeling_timesformer.py TimesformerModel, attention_type
// "divided_space_time"): each frame's patches through a Conv2d, the cls token and learned
// position embeddings per frame, learned time embeddings per patch, then layers of temporal
// attention (temporal_layernorm, temporal_attention, temporal_dense) and spatial attention per
// frame with the cls token repeated over the frames and averaged back, the MLP, and the final
// `layernorm`. Attention is one fused `qkv` Linear per module. Weights under `prefix`:
// embeddings.{cls_token, position_embeddings, time_embeddings, patch_embeddings.projection},
// encoder.layer.N.{layernorm_before, attention.attention.qkv, attention.output.dense,
// temporal_layernorm, temporal_attention.attention.qkv, temporal_attention.output.dense,
// temporal_dense, layernorm_after, intermediate.dense, output.dense}, layernorm.
struct TimesformerRecipe {
  std::string prefix;  // "timesformer." on the classifier, "" on TimesformerModel
  int64_t image_size = 224, patch_size = 16, channels = 3, frames = 8;
  int64_t hidden = 768, intermediate = 3072, layers = 12, heads = 12;
  Activation act = Activation::kGeluErf;
  double eps = 1e-6;
  bool qkv_bias = true;

  int64_t Patches() const { return (image_size / patch_size) * (image_size / patch_size); }
};

// last_hidden_state [B, 1 + patches * frames, hidden]; pooled = token 0.
class TimesformerTrunk : public VisionTrunk {
 public:
  explicit TimesformerTrunk(TimesformerRecipe recipe);

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override;
  std::vector<int64_t> PixelValuesShape() const override;
  std::vector<int64_t> LastHiddenShape() const override;
  int64_t PooledWidth() const override { return r_.hidden; }

 private:
  // TimeSformerAttention: qkv, softmax(q k^T * scale) v, output.dense; x [b, n, hidden].
  at::Tensor Attend(const WeightMap& w, const std::string& p, const at::Tensor& x) const;
  at::Tensor Layer(const WeightMap& w, int64_t i, const at::Tensor& x) const;

  TimesformerRecipe r_;
};

// get_sinusoid_encoding_table(n, d)[0]: angle(p, j) = p / 10000^(2 (j // 2) / d), sin on the even
// columns and cos on the odd ones (interleaved), in `dtype` on `device`.
at::Tensor InterleavedSinusoidTable(int64_t n, int64_t d, const at::TensorOptions& options);

}  // namespace ts::zoo::internal
