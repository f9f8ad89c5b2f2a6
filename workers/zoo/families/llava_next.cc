// llava_next (modeling_llava_next.py): LlavaNextForConditionalGeneration (image-text-to-text) and
// LlavaNextModel on the LLaVA lineage (families/llava.h): LLaVA's CLIP tower cut at
// vision_feature_layer and its projector, with "anyres" images. Each image comes as its base view
// and the tiles of the grid pinpoint select_best_resolution picks for image_sizes, pixel_values
// [B, 1 + tiles, C, S, S]; pack_image_features puts the base view's features first, then the
// tiles' laid out spatially ([grid_h * side, grid_w * side]) with `image_newline` [text hidden]
// appended to each row, after unpad_image. Shapes here are static: the batches carry images of
// the first pinpoint's size (image_sizes = that pinpoint), for which select_best_resolution picks
// that pinpoint and unpad_image cuts nothing; an image of another size changes the token count
// and is not run. The text model is llama or mistral (text_config.model_type).
// vision_feature_select_strategy "full" is refused (each tile's cls token breaks the grid view in
// transformers too), as are a list of feature layers and pinpoints that are not multiples of the
// tower's image_size. Tiny scale: the tower at 32 pixels with 16-pixel patches (4 tokens a view),
// the pinpoints scaled by 32 / image_size, so the first ([336, 672] -> [32, 64]) gives a 1 x 2
// grid and 4 + 2 x (4 + 1) = 14 image tokens.
#include <algorithm>
#include <vector>

#include "workers/zoo/families/llava.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

constexpr int64_t kNextTinyPatch = 16;

json NextPinpoints(const json& config) {
  auto it = config.find("image_grid_pinpoints");
  if (it != config.end() && !it->is_null()) return *it;
  return json::parse("[[336,672],[672,336],[672,672],[1008,336],[336,1008]]");
}

// The first pinpoint as a grid of tiles of the tower's image size.
Status ReadNextGrid(const ConfigReader& r, const json& config, VisionLanguageRecipe& v) {
  const json pins = NextPinpoints(config);
  if (!pins.is_array() || pins.empty())
    return r.Error("image_grid_pinpoints", "expected a non-empty list of [height, width]");
  for (const json& p : pins) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number_integer() ||
        p[0].get<int64_t>() <= 0 || p[1].get<int64_t>() <= 0 ||
        p[0].get<int64_t>() % v.vision.image != 0 || p[1].get<int64_t>() % v.vision.image != 0) {
      return r.Error("image_grid_pinpoints",
                     "expected [height, width] pairs of positive multiples of "
                     "vision_config.image_size (" +
                         std::to_string(v.vision.image) + "), got " + p.dump());
    }
  }
  v.image_h = pins[0][0].get<int64_t>();
  v.image_w = pins[0][1].get<int64_t>();
  v.grid_h = v.image_h / v.vision.image;
  v.grid_w = v.image_w / v.vision.image;
  return OkStatus();
}

}  // namespace

StatusOr<VisionLanguageRecipe> ParseLlavaNext(const json& config, TextHeadKind head) {
  TS_ASSIGN_OR_RETURN(VisionLanguageRecipe v, ParseLlavaBase(config, head, true));
  ConfigReader r(config);
  if (r.Has("vision_feature_layer") && !config["vision_feature_layer"].is_number_integer())
    return r.Error("vision_feature_layer", "a list of layers is not supported by the zoo");
  TS_ASSIGN_OR_RETURN(v.feature_layer, r.Int("vision_feature_layer", -2));
  if (v.feature_layer < -(v.vision.layers + 1) || v.feature_layer > v.vision.layers) {
    return r.Error("vision_feature_layer",
                   "outside the tower's " + std::to_string(v.vision.layers + 1) + " hidden states");
  }
  TS_ASSIGN_OR_RETURN(std::string strategy, r.String("vision_feature_select_strategy", "default"));
  if (strategy != "default") {
    return r.Error("vision_feature_select_strategy",
                   "only 'default' is supported by the zoo (with the cls token the tiles' "
                   "features do not form the grid), got '" +
                       strategy + "'");
  }
  v.drop_cls = true;
  TS_ASSIGN_OR_RETURN(v.projector_bias, r.Bool("multimodal_projector_bias", true));
  TS_RETURN_IF_ERROR(ReadNextGrid(r, config, v));
  return v;
}

// LLaVA's tower depth; 16-pixel patches; the pinpoints at the tiny image size.
void ScaleLlavaNextTower(const VisionLanguageRecipe& v, json& t) {
  const int64_t reach =
      v.feature_layer < 0 ? -v.feature_layer : std::max<int64_t>(v.feature_layer, 1);
  json& vision = t["vision_config"];
  vision["num_hidden_layers"] = std::min(v.vision.layers, reach);
  vision["patch_size"] = kNextTinyPatch;
  const int64_t tiny = vision["image_size"].get<int64_t>();
  json pins = json::array();
  for (const json& p : NextPinpoints(t)) {
    pins.push_back(
        {p[0].get<int64_t>() / v.vision.image * tiny, p[1].get<int64_t>() / v.vision.image * tiny});
  }
  t["image_grid_pinpoints"] = pins;
}

namespace {

std::vector<ArchEntry> LlavaNextArchs() {
  // modelled on llava-hf/llava-v1.6-mistral-7b-hf
  const json example = json::parse(R"({"model_type":"llava_next","image_token_index":32000,
      "projector_hidden_act":"gelu","tie_word_embeddings":false,"vision_feature_layer":-2,
      "vision_feature_select_strategy":"default",
      "image_grid_pinpoints":[[336,672],[672,336],[672,672],[1008,336],[336,1008]],
      "text_config":{"model_type":"mistral","hidden_size":4096,"intermediate_size":14336,
        "num_attention_heads":32,"num_key_value_heads":8,"num_hidden_layers":32,
        "vocab_size":32064,"max_position_embeddings":32768,"rms_norm_eps":1e-5,
        "rope_theta":1000000.0,"sliding_window":null,"hidden_act":"silu",
        "tie_word_embeddings":false},
      "vision_config":{"model_type":"clip_vision_model","hidden_size":1024,"image_size":336,
        "intermediate_size":4096,"num_attention_heads":16,"num_hidden_layers":24,
        "patch_size":14,"projection_dim":768,"hidden_act":"quick_gelu","layer_norm_eps":1e-5}})");
  return {LlavaLikeEntry("LlavaNextForConditionalGeneration", "llava_next", TextHeadKind::kCausalLM,
                         "image-text-to-text", example, ParseLlavaNext, ScaleLlavaNextTower),
          LlavaLikeEntry("LlavaNextModel", "llava_next", TextHeadKind::kBase, "feature-extraction",
                         example, ParseLlavaNext, ScaleLlavaNextTower)};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(LlavaNext, LlavaNextArchs);

}  // namespace ts::zoo::internal
