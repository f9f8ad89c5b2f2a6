// The multimodal kind: CLIP's text and vision towers (pre-LN encoders, trunks/
// vision_transformer.h's PreLnEncoder with CLIP's names) and the contrastive CLIPModel.
// CLIPVisionModel is a VisionModel (trunks/vision.h) over ClipVisionTrunk.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/trunks/vision.h"
#include "workers/zoo/trunks/vision_transformer.h"

namespace ts::zoo::internal {

// One CLIP tower's sizes (text_config / vision_config).
struct ClipTowerRecipe {
  int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0;
  Activation act = Activation::kQuickGelu;
  double eps = 1e-5;
  int64_t vocab = 0, max_pos = 77, eos = 2;       // text
  int64_t image = 224, patch = 32, channels = 3;  // vision
  // The tower's state_dict prefix: "text_model." / "vision_model." inside CLIPModel; ""
  // in transformers 5's CLIPTextModel / CLIPVisionModel, which hold the tower's modules
  // directly.
  std::string prefix;
  // The tower's encoder: CLIPEncoderLayer names, weights listed k, v, q, out_proj,
  // layer_norm1, fc1, fc2, layer_norm2.
  PreLnEncoderRecipe Encoder() const;
};

// kImageClassification: CLIPForImageClassification, the vision tower of a full CLIPConfig
// (`vision_model.`) and a classifier on the mean of its patch tokens.
enum class ClipKind { kModel, kText, kVision, kImageClassification };

struct ClipRecipe {
  ClipKind kind = ClipKind::kModel;
  ClipTowerRecipe text, vision;
  int64_t projection_dim = 512;
  int64_t num_labels = 2;  // kImageClassification
  double logit_scale_init = 2.6592;
};

// Tokens of the text batches.
inline constexpr int64_t kClipTextLen = 16;

// vision_model.*: patch embedding (no bias), class embedding, positions, pre_layrnorm, the
// encoder; last_hidden_state = the encoder's output, pooled = post_layernorm(token 0).
class ClipVisionTrunk : public VisionTrunk {
 public:
  explicit ClipVisionTrunk(ClipTowerRecipe recipe);

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override;
  std::vector<int64_t> LastHiddenShape() const override;
  int64_t PooledWidth() const override { return r_.hidden; }
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override;
  // hidden_states[index] of output_hidden_states (0: the embeddings after pre_layrnorm, i: after
  // layer i; negative counts from the end, -1 the last layer's output) [B, 1 + patches, hidden].
  at::Tensor HiddenState(const WeightMap& w, const at::Tensor& pixel_values, int64_t index) const;
  // hidden_states[0 .. layers] (layers + 1 tensors), the tower run once through `layers` layers.
  std::vector<at::Tensor> HiddenStates(const WeightMap& w, const at::Tensor& pixel_values,
                                       int64_t layers) const;
  const ClipTowerRecipe& recipe() const { return r_; }

 private:
  at::Tensor Embed(const WeightMap& w, const at::Tensor& pixel_values) const;

  ClipTowerRecipe r_;
  std::optional<PreLnEncoder> encoder_;  // built after the embeddings (weight order)
};

// CLIPModel (logits_per_image, logits_per_text, text_embeds, image_embeds; symmetric
// contrastive loss) and CLIPTextModel (last_hidden_state, pooler_output; regression loss).
std::unique_ptr<Model> MakeClipModel(ModelSpec spec, ClipRecipe recipe);

}  // namespace ts::zoo::internal
