// The CLIP lineage (clip.cc; llava.cc takes its vision tower): one tower's config parsing and
// tiny scaling. Private to the zoo.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/trunks/multimodal.h"

namespace ts::zoo::internal {

// A CLIPTextConfig (`text`) or CLIPVisionConfig, its errors under `prefix`
// ("vision_config.").
StatusOr<ClipTowerRecipe> ParseClipTower(const nlohmann::json& tower, const std::string& prefix,
                                         bool text);
// The tiny tower (the BERT/ViT width policy; text: the tiny vocabulary and positions; vision:
// the tiny image and patch).
void ScaleClipTower(nlohmann::json& tiny, const ClipTowerRecipe& real, bool text);

}  // namespace ts::zoo::internal
