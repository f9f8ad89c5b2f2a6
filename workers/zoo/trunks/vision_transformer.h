// ViT-style trunks: a pre-LN transformer encoder over patch tokens (vit, deit), and the
// encoder stack itself (PreLnEncoder), which CLIP's towers share.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/trunks/vision.h"

namespace ts::zoo::internal {

// The modules of one pre-LN encoder layer, in the order of its forward pass.
enum class EncoderSlot { kNorm1, kQuery, kKey, kValue, kOut, kNorm2, kFc1, kFc2 };
inline constexpr size_t kEncoderSlots = 8;

// HF names of an encoder layer's modules (".weight" / ".bias" appended) and the order its
// weights are listed in (the init RNG follows it).
struct EncoderNaming {
  std::string layers;                              // before the index: "encoder.layer."
  std::array<std::string, kEncoderSlots> modules;  // indexed by EncoderSlot
  std::vector<EncoderSlot> order;                  // weight order within a layer
};

// A layer's slots in forward order, the order most layers register their weights in.
std::vector<EncoderSlot> EncoderForwardOrder();

// transformers 5's ViTLayer: layernorm_before, attention.{q,k,v,o}_proj, layernorm_after,
// mlp.fc1 / fc2 under layers.N; listed in forward order.
EncoderNaming VitEncoderNaming();

// transformers 4.x's ViTLayer, which DPT's DPTViTLayer, MobileViT's MobileViTTransformerLayer
// and VideoMAE's VideoMAELayer keep: layernorm_before, attention.attention.{query,key,value},
// attention.output.dense, layernorm_after, intermediate.dense, output.dense under `layers` +
// N; weights listed in `order` (MobileViT registers the attention and the MLP before its norms).
EncoderNaming VitV4EncoderNaming(std::string layers,
                                 std::vector<EncoderSlot> order = EncoderForwardOrder());

struct PreLnEncoderRecipe {
  int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0;
  Activation act = Activation::kGeluErf;
  bool relu6 = false;  // MobileViT's hidden_act "relu6" (VisionActivation): overrides `act`
  double eps = 1e-12;
  bool qkv_bias = true;  // q/k/v biases (the other linears always have one)
  // VideoMAE / BEiT style (with qkv_bias false): bias-free query/key/value Linears and the
  // parameters `q_bias` and `v_bias` beside them (the key's bias is zero).
  bool qv_bias_params = false;
  EncoderNaming naming;
};

// x + attn(LN1(x)), then x + fc2(act(fc1(LN2(x)))), per layer; no final norm.
class PreLnEncoder {
 public:
  // Appends the weights under `prefix` + naming.layers + index to `weights`.
  PreLnEncoder(PreLnEncoderRecipe recipe, const std::string& prefix, WeightList& weights);

  // x [B, S, hidden]; `blocked` as nn::Attention (may be undefined). `layers` >= 0: only the
  // first that many layers (hidden_states[layers] of transformers' output_hidden_states).
  at::Tensor Forward(const WeightMap& w, at::Tensor x, const at::Tensor& blocked,
                     int64_t layers = -1) const;
  // transformers' output_hidden_states up to hidden_states[layers]: x, then each of the first
  // `layers` layers' outputs (layers + 1 tensors).
  std::vector<at::Tensor> HiddenStates(const WeightMap& w, at::Tensor x, const at::Tensor& blocked,
                                       int64_t layers) const;
  const PreLnEncoderRecipe& recipe() const { return r_; }

 private:
  at::Tensor Layer(const WeightMap& w, at::Tensor x, const at::Tensor& blocked, size_t li) const;

  struct Names {
    std::array<std::string, kEncoderSlots> weight, bias;  // bias empty: none
  };
  PreLnEncoderRecipe r_;
  std::vector<Names> layers_;
};

struct VitRecipe {
  std::string prefix;  // "vit." / "deit." on heads, "" on the base models
  int64_t image_size = 224, patch_size = 16, channels = 3;
  bool distillation_token = false;  // DeiT: a second token after the cls token
  // False: no embeddings.cls_token (I-JEPA: the positions cover the patches only; pooled is the
  // mean of the tokens).
  bool cls_token = true;
  bool mask_token = false;  // use_mask_token: embeddings.mask_token [1, 1, hidden]
  PreLnEncoderRecipe encoder;
};

// Conv patch embedding, cls (and distillation) token, learned positions, the encoder, a final
// LayerNorm. last_hidden_state [B, tokens, hidden]; pooled = token 0 (without a cls token: the
// mean of the tokens).
class VitTrunk : public VisionTrunk {
 public:
  explicit VitTrunk(VitRecipe recipe);

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override;
  // ViTEmbeddings / DeiTEmbeddings under bool_masked_pos: patch tokens * (1 - mask) +
  // mask_token * mask, before the cls (and distillation) token is prepended.
  VisionFeatures ForwardMasked(const WeightMap& w, const at::Tensor& pixel_values,
                               const at::Tensor& bool_masked_pos) const override;
  std::vector<int64_t> LastHiddenShape() const override;
  int64_t PooledWidth() const override { return r_.encoder.hidden; }

 private:
  VitRecipe r_;
  int64_t tokens_ = 0;
  std::string cls_, dist_, mask_, pos_, patch_w_, patch_b_;
  std::optional<PreLnEncoder> encoder_;  // built after the embeddings (weight order)
  std::string ln_, lnb_;
};

// VitRecipe from a parsed ViT/DeiT config.
VitRecipe VitRecipeFromConfig(const VitConfig& c, std::string prefix, bool distillation_token);

}  // namespace ts::zoo::internal
