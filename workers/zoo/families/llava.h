// The LLaVA lineage (llava.cc; vipllava.cc, llava_next.cc and llava_next_video.cc derive from it
// as transformers' modular files derive them from LLaVA): a CLIP vision tower, a projector and a
// decoder language model on the vision-language kind (trunks/vision_language.h). What the derived
// families share: the text model chosen by text_config.model_type, the tower, the image token,
// the tiny scaling and the registry entry.
// Private to the zoo.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/trunks/vision_language.h"

namespace ts::zoo::internal {

// A family's parse of its config into the recipe for head `head` (kCausalLM or kBase).
using VlmParseFn =
    std::function<StatusOr<VisionLanguageRecipe>(const nlohmann::json&, TextHeadKind)>;
// The family's own tiny fields after the shared scaling: `real` the parsed real config,
// `tiny` the config being written (its vision_config already scaled).
using VlmScaleFn = std::function<void(const VisionLanguageRecipe& real, nlohmann::json& tiny)>;

// `config[field]`, or {} when absent or null.
nlohmann::json VlmSub(const nlohmann::json& config, const char* field);

// The part every LLaVA-lineage config shares: text_config (llama, or mistral where `mistral`
// is allowed, CONFIG_MAPPING's defaults for the sizes a llama text_config leaves out), the CLIP
// vision_config, projector_hidden_act, image_token_index. The caller reads its feature layers
// and projector fields.
StatusOr<VisionLanguageRecipe> ParseLlavaBase(const nlohmann::json& config, TextHeadKind head,
                                              bool mistral);

// The tiny config: the text model's and the tower's tiny scaling, the image token moved into
// the tiny vocabulary, then `extra` (the family's feature layers and the tower's depth).
StatusOr<nlohmann::json> ScaleLlavaLike(const nlohmann::json& config, const VlmParseFn& parse,
                                        const VlmScaleFn& extra);

// The registry entry of `arch` (`model_type`) built by `parse`; the tower's modules the
// features never reach (the layers after the last feature layer, post_layernorm) are
// state_dict entries, not weights.
// llava_next.cc (llava_next_video derives from it): LLaVA-NeXT's config (the anyres grid of the
// first image_grid_pinpoints entry) and its tiny tower and pinpoints.
StatusOr<VisionLanguageRecipe> ParseLlavaNext(const nlohmann::json& config, TextHeadKind head);
void ScaleLlavaNextTower(const VisionLanguageRecipe& v, nlohmann::json& t);

ArchEntry LlavaLikeEntry(const std::string& arch, const std::string& model_type, TextHeadKind head,
                         const char* task, const nlohmann::json& example, VlmParseFn parse,
                         VlmScaleFn extra);

}  // namespace ts::zoo::internal
