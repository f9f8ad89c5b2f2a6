// The DINOv2 trunk (modular_dinov2.py, modular_dinov2_with_registers.py): ViT's patch embedding
// and attention with per-branch layer scale (`layer_scale1.lambda1`, `layer_scale2.lambda1`),
// an MLP of hidden * mlp_ratio (fc1 / fc2) or a SwiGLU (gate_proj / up_proj / down_proj, width
// (int(hidden * mlp_ratio * 2 / 3) + 7) // 8 * 8), the cls token, optional register tokens
// (inserted after the cls token once the position embeddings are added; they have none) and a
// final LayerNorm. Layers under `encoder.layer.N.`.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/trunks/vision.h"

namespace ts::zoo::internal {

struct Dinov2Recipe {
  std::string prefix;  // "dinov2." (or "dinov2_with_registers.") on the classifier, "" otherwise
  int64_t image_size = 224, patch_size = 14, channels = 3;
  int64_t hidden = 768, layers = 12, heads = 12;
  double mlp_ratio = 4.0;
  bool swiglu = false;
  int64_t registers = 0;  // num_register_tokens (dinov2_with_registers)
  Activation act = Activation::kGeluErf;
  double eps = 1e-6;
  bool qkv_bias = true;

  int64_t Grid() const { return image_size / patch_size; }
  // The MLP's inner width (Dinov2MLP, or Dinov2SwiGLUFFN's rounded one).
  int64_t MlpWidth() const;
};

// last_hidden_state [B, 1 + registers + grid^2, hidden] after the final LayerNorm; pooled =
// token 0.
class Dinov2Trunk : public VisionTrunk {
 public:
  explicit Dinov2Trunk(Dinov2Recipe recipe);

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override;
  std::vector<int64_t> LastHiddenShape() const override;
  int64_t PooledWidth() const override { return r_.hidden; }
  // lambda1 starts at layerscale_value (1) in transformers: here U(0.5, 1.5), so that a branch
  // scaled on the wrong side still shows.
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override;
  const Dinov2Recipe& recipe() const { return r_; }

 private:
  at::Tensor Layer(const WeightMap& w, int64_t i, const at::Tensor& x) const;

  Dinov2Recipe r_;
};

}  // namespace ts::zoo::internal
