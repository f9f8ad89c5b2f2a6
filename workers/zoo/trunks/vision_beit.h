// The BEiT trunk (modular_beit.py, transformers 5: BEiT on ViT's attention and MLP modules;
// data2vec-vision derives from it): conv patch embedding, the cls token, optional absolute
// positions, pre-LN layers with layer scale (`lambda_1`, `lambda_2`) whose attention (`q_proj`
// and `v_proj` with biases, `k_proj` without) adds a relative position bias (a table of
// (2 Wh - 1)(2 Ww - 1) + 3 rows per head, gathered by the relative position index with the cls
// token's three extra distances; per layer or shared by the encoder), then the final
// `layernorm` (use_mean_pooling false) or none; pooled = `pooler.layernorm` of the patch tokens'
// mean (use_mean_pooling) or token 0. Weights under `prefix`: embeddings.{cls_token,
// position_embeddings, patch_embeddings.projection}, encoder.layer.N.{layernorm_before,
// attention.{q,k,v,o}_proj, lambda_1, layernorm_after, mlp.fc1, mlp.fc2, lambda_2,
// relative_position_bias.relative_position_bias_table}, encoder.relative_position_bias (shared),
// layernorm, pooler.layernorm.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/trunks/vision.h"

namespace ts::zoo::internal {

struct BeitRecipe {
  std::string prefix;  // "beit." / "data2vec_vision." on the classifier, "" on the base models
  int64_t image_size = 224, patch_size = 16, channels = 3;
  int64_t hidden = 768, intermediate = 3072, layers = 12, heads = 12;
  Activation act = Activation::kGeluErf;
  double eps = 1e-12;
  bool layer_scale = true;  // layer_scale_init_value > 0
  bool absolute_positions = false, relative_bias = true, shared_relative_bias = false;
  bool mean_pooling = true;
  // BeitBackbone (BeitModel without its pooler under "encoder."): last_hidden_state is the last
  // layer's output, before the final layernorm (which the backbone never calls).
  bool backbone = false;

  int64_t Grid() const { return image_size / patch_size; }
};

// last_hidden_state [B, 1 + grid^2, hidden]; pooled as BeitPooler.
class BeitTrunk : public VisionTrunk {
 public:
  explicit BeitTrunk(BeitRecipe recipe);

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override;
  std::vector<int64_t> LastHiddenShape() const override;
  int64_t PooledWidth() const override { return r_.hidden; }
  // lambda_1 / lambda_2 start at layer_scale_init_value (0.1) in transformers: here U(0.5, 1.5),
  // so that a branch scaled on the wrong side still shows.
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override;

 private:
  // BeitRelativePositionBias over table `p` + "relative_position_bias_table": [1, heads, S, S].
  at::Tensor RelativeBias(const WeightMap& w, const std::string& p, const at::Tensor& like) const;
  at::Tensor Layer(const WeightMap& w, int64_t i, const at::Tensor& x,
                   const at::Tensor& shared_bias) const;

  BeitRecipe r_;
  at::Tensor index_;  // the relative position index, [(grid^2 + 1)^2] int64 on the CPU
};

}  // namespace ts::zoo::internal
