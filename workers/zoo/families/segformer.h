// The Mix Transformer lineage (segformer.cc; glpn.cc derives from it): the encoder's config
// fields parsed into the trunk's recipe (trunks/vision_segformer.h) and its tiny scaling.
// Private to the zoo.
#pragma once

#include <nlohmann/json.hpp>

#include "workers/zoo/config.h"
#include "workers/zoo/trunks/vision_segformer.h"

namespace ts::zoo::internal {

// num_channels, image_size, num_encoder_blocks and the per-stage lists depths, sr_ratios,
// hidden_sizes, patch_sizes, strides, num_attention_heads, mlp_ratios; hidden_act. Errors name
// the field.
StatusOr<SegformerRecipe> ParseMixTransformer(const nlohmann::json& config);

// Writes the tiny encoder into `tiny` (a copy of the real config): every stage kept with its
// kernel, stride, sr ratio and MLP ratio, one layer per stage, min(heads, 2) heads of width 8,
// the image the tiny profile's side doubled until every stage's map is at least its sr ratio;
// and the run profile.
Status ScaleMixTransformer(const SegformerRecipe& recipe, nlohmann::json& tiny);

}  // namespace ts::zoo::internal
