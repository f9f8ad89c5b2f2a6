// Swin trunk: patch embedding + LayerNorm, stages of (shifted-)window attention blocks with a
// relative position bias, patch merging between stages, a final LayerNorm; pooler_output is
// the mean over tokens.
//
// Swin V2 (modular_swinv2.py, `v2`): scaled cosine attention (normalised q and k, q times
// exp(min(logit_scale, log 100)), no 1/sqrt(d)), the continuous position bias 16 *
// sigmoid(continuous_position_bias_mlp(log-spaced relative coordinates)) gathered by the relative
// position index, a bias-free k_proj, res-post-norm blocks (x + layernorm_before(attn(x)), then
// h + layernorm_after(mlp(h))), and patch merging's reduction before its norm (over 2 x dim).
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
  bool v2 = false;
  // v2: per stage, the window the continuous bias's coordinates are normalised by (0: the
  // stage's own window).
  std::vector<int64_t> pretrained_window_sizes;
  // False (Swinv2Backbone): no final `layernorm`; last_hidden_state is the last stage's output.
  bool final_norm = true;
  // DonutSwin's v1 names (modular_donut_swin.py keeps 4.x's Swin layout):
  // attention.self.{query,key,value,relative_position_bias_table}, attention.output.dense,
  // intermediate.dense, output.dense, in place of transformers 5 Swin's attention.q_proj ...,
  // attention.relative_position_bias.relative_position_bias_table, mlp.fc1 / fc2.
  bool donut_names = false;
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
  // v2's logit_scale starts at log(10) in transformers: here U(1.8, 2.8), under the clamp at
  // log(100).
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override;
  // The last stage's side (tokens per row of last_hidden_state).
  int64_t LastSide() const;

 private:
  struct BlockShape {
    int64_t b, res, dim, heads, ws, shift;
    int64_t pretrained_ws = 0;  // v2
  };
  // v2: the [heads, N, N] bias of a window (16 * sigmoid of the continuous bias MLP).
  at::Tensor ContinuousBias(const WeightMap& w, const std::string& bp, const BlockShape& s,
                            const at::Tensor& like) const;
  void AddV2Attention(const std::string& bp, int64_t dim, int64_t heads);
  void AddMlp(const std::string& bp, int64_t dim, int64_t mlp);
  at::Tensor LnSeq(const WeightMap& w, const std::string& p, const at::Tensor& x) const;
  // A v1 block module's name under the recipe's naming (`v5`: transformers 5 Swin's).
  std::string Name(const std::string& v5) const;
  at::Tensor FinishWindowAttention(const WeightMap& w, const std::string& bp, at::Tensor scores,
                                   const at::Tensor& v, const BlockShape& s) const;
  at::Tensor Block(const WeightMap& w, const std::string& bp, const at::Tensor& x,
                   const BlockShape& s) const;
  at::Tensor WindowAttention(const WeightMap& w, const std::string& bp, const at::Tensor& win,
                             const BlockShape& s) const;

  SwinRecipe r_;
  int64_t dim_ = 0;
};

}  // namespace ts::zoo::internal
