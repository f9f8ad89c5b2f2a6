// The vision-language kind (image-text-to-text): a vision tower, a projector and a decoder
// language model (trunks/decoder.h) whose input embeddings at the image token are replaced by the
// projected image features, as transformers' LlavaModel.get_image_features and
// inputs_embeds.masked_scatter do. LlavaForConditionalGeneration and LlavaModel (families/
// llava.cc) are built on it.
//
// Weights: the tower's (`<base>vision_tower.`), the projector's (`<base>multi_modal_projector.`),
// then the language model's (`<base>language_model.`, and `lm_head` on the conditional-generation
// head), with <base> "model." under ForConditionalGeneration and "" for the base model. The
// batch: pixel_values [B, C, H, W], input_ids [B, S] with the first `image_tokens` positions after
// token 0 the image token, attention_mask, and the language model head's labels (-100 at the
// image tokens).
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workers/zoo/model.h"
#include "workers/zoo/trunks/decoder.h"
#include "workers/zoo/trunks/multimodal.h"

namespace ts::zoo::internal {

struct VisionLanguageRecipe {
  std::string base = "model.";  // "" for the base model
  ClipTowerRecipe vision;       // prefix set by the model
  // vision_feature_layer: the tower's hidden_states index the features come from (-2).
  int64_t feature_layer = -2;
  // VipLLaVA's vision_feature_layers as a list: the hidden states concatenated on the feature
  // axis (empty: feature_layer alone).
  std::vector<int64_t> feature_layers;
  // VipLLaVA: multi_modal_projector.projector_layernorm over the (concatenated) features first.
  bool projector_norm = false;
  double projector_norm_eps = 1e-5;  // projector_layernorm_eps
  // vision_feature_select_strategy "default" drops the cls token; "full" keeps it.
  bool drop_cls = true;
  Activation projector_act = Activation::kGeluErf;  // projector_hidden_act
  bool projector_bias = true;                       // multimodal_projector_bias
  int64_t image_token = 0;                          // image_token_index
  // LLaVA-NeXT's anyres (families/llava_next.cc): grid_h x grid_w tiles of the tower's image
  // size after each image's base view (pixel_values [B, 1 + tiles, C, S, S]), packed with the
  // `image_newline` parameter after each row of tile features; image_h x image_w is the size
  // the batches' image_sizes carry. 0: one view per image (LLaVA).
  int64_t grid_h = 0, grid_w = 0, image_h = 0, image_w = 0;
  decoder::Recipe text;                             // names set by the model
  TextHeadKind head = TextHeadKind::kCausalLM;      // kCausalLM or kBase

  // Image tokens per image (the tower's patches, plus the cls token under "full"; anyres: the
  // base view's, then grid rows of tile tokens each with its newline).
  int64_t ImageTokens() const;
  // The tower layers hidden_states[feature_layer] (every feature layer) runs through.
  int64_t TowerLayersRun() const;
  // The feature layers as non-negative hidden_states indices.
  std::vector<int64_t> FeatureIndices() const;
};

// Whether the model reads tower weight `name` (under recipe.vision.prefix): not post_layernorm,
// not the layers after the feature layer (transformers builds them; they get no gradient).
bool VisionTowerReads(const VisionLanguageRecipe& recipe, const std::string& name);

StatusOr<std::unique_ptr<Model>> BuildVisionLanguageModel(ModelSpec spec,
                                                          VisionLanguageRecipe recipe);

}  // namespace ts::zoo::internal
