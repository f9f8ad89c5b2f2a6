// The DINOv3 ViT trunk (modular_dinov3_vit.py): a bias-free-by-default Conv2d patch embedding
// (`embeddings.patch_embeddings`), the cls token and num_register_tokens register tokens before
// the patches, no position embeddings: a 2D rotary embedding over the patch tokens only
// (DINOv3ViTRopePositionEmbedding: patch centres in [-1, 1], inv_freq = 1 / theta^(4i / head_dim)
// for i < head_dim / 4, angles 2 pi * (y, x) * inv_freq, tiled twice; the prefix tokens are not
// rotated). Layers `layer.N.`: norm1, attention.{q,k,v,o}_proj (biases per query_bias, key_bias,
// value_bias, proj_bias), layer_scale1.lambda1, norm2, mlp (up_proj / down_proj, or gate_proj /
// up_proj / down_proj when use_gated_mlp; biases per mlp_bias), layer_scale2.lambda1; a final
// `norm`. The forward is transformers' eval-mode one: the training-time random shift / jitter /
// rescale of the patch coordinates (pos_embed_*) is not applied, as no dropout is.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/trunks/vision.h"

namespace ts::zoo::internal {

struct Dinov3VitRecipe {
  std::string prefix;  // "" (DINOv3ViTModel)
  int64_t image_size = 224, patch_size = 16, channels = 3;
  int64_t hidden = 384, intermediate = 1536, layers = 12, heads = 6, registers = 0;
  Activation act = Activation::kGeluErf;
  double eps = 1e-5, rope_theta = 100.0;
  bool query_bias = true, key_bias = false, value_bias = true, proj_bias = true;
  bool mlp_bias = true, gated_mlp = false;

  int64_t Grid() const { return image_size / patch_size; }
};

// The rotary angles [grid * grid, head_dim] with `options` (device, dtype), rows in row-major
// patch order (y then x frequencies, tiled twice): cos / sin of it are transformers' tables.
at::Tensor Dinov3RopeAngles(int64_t grid, int64_t head_dim, double theta,
                            const at::TensorOptions& options);

// last_hidden_state [B, 1 + registers + grid^2, hidden] after the final norm; pooled = token 0.
class Dinov3VitTrunk : public VisionTrunk {
 public:
  explicit Dinov3VitTrunk(Dinov3VitRecipe recipe);

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override;
  std::vector<int64_t> LastHiddenShape() const override;
  int64_t PooledWidth() const override { return r_.hidden; }
  // lambda1 starts at layerscale_value in transformers: here U(0.5, 1.5) (as DINOv2's).
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override;

 private:
  at::Tensor Layer(const WeightMap& w, int64_t i, const at::Tensor& x, const at::Tensor& cos,
                   const at::Tensor& sin) const;

  Dinov3VitRecipe r_;
};

}  // namespace ts::zoo::internal
