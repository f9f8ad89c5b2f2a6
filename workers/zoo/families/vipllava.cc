// vipllava (modeling_vipllava.py, modular_vipllava.py): VipLlavaForConditionalGeneration
// (image-text-to-text) and VipLlavaModel on the LLaVA lineage (families/llava.h): the CLIP
// tower's hidden_states at every index of vision_feature_layers (default [-2, -5, -8, -11, 6]),
// each without its cls token, concatenated on the feature axis, through
// VipLlavaMultiModalProjector: projector_layernorm (eps projector_layernorm_eps) over
// len(layers) x vision hidden, linear_1 (biased), projector_hidden_act, linear_2 (biased); the
// features spliced at image_token_index into a llama language model (VipLlavaConfig's
// text_config: llama or mistral). An int vision_feature_layers is transformers' single-layer
// form and is read as a list of one.
//
// Tiny scale: the tower keeps min(layers, 4) layers and each feature layer is mapped to the
// same relative depth of the tiny tower (its sign kept, so -2 stays a from-the-end index), so
// the defaults' five layers read four distinct hidden states ([-1, -2, -2, -3, 1]); the layers
// after the deepest one and post_layernorm are state_dict entries, not weights, as LLaVA's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "workers/zoo/families/llava.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

constexpr int64_t kVipTinyTowerLayers = 4;

StatusOr<std::vector<int64_t>> VipFeatureLayers(const ConfigReader& r, const json& config,
                                                int64_t tower_layers) {
  std::vector<int64_t> layers = {-2, -5, -8, -11, 6};
  if (r.Has("vision_feature_layers")) {
    const json& f = config["vision_feature_layers"];
    if (f.is_number_integer()) {
      layers = {f.get<int64_t>()};
    } else if (f.is_array() && !f.empty()) {
      layers.clear();
      for (const json& l : f) {
        if (!l.is_number_integer())
          return r.Error("vision_feature_layers", "expected a list of integers");
        layers.push_back(l.get<int64_t>());
      }
    } else {
      return r.Error("vision_feature_layers", "expected an integer or a non-empty list");
    }
  }
  for (int64_t l : layers) {
    if (l < -(tower_layers + 1) || l > tower_layers) {
      return r.Error("vision_feature_layers", std::to_string(l) + " is outside the tower's " +
                                                  std::to_string(tower_layers + 1) +
                                                  " hidden states");
    }
  }
  return layers;
}

StatusOr<VisionLanguageRecipe> ParseVipLlava(const json& config, TextHeadKind head) {
  TS_ASSIGN_OR_RETURN(VisionLanguageRecipe v, ParseLlavaBase(config, head, true));
  ConfigReader r(config);
  TS_ASSIGN_OR_RETURN(v.feature_layers, VipFeatureLayers(r, config, v.vision.layers));
  v.feature_layer = v.feature_layers.front();
  v.drop_cls = true;
  v.projector_bias = true;
  v.projector_norm = true;
  TS_ASSIGN_OR_RETURN(v.projector_norm_eps, r.Double("projector_layernorm_eps", 1e-5));
  if (v.projector_norm_eps <= 0) return r.Error("projector_layernorm_eps", "must be positive");
  return v;
}

// The tiny tower's depth and each feature layer at the same relative depth in it.
void ScaleVipLlavaTower(const VisionLanguageRecipe& v, json& t) {
  const int64_t real = v.vision.layers, tiny = std::min(real, kVipTinyTowerLayers);
  json layers = json::array();
  for (int64_t l : v.feature_layers) {
    const int64_t pos = l < 0 ? real + 1 + l : l;
    const auto at = static_cast<int64_t>(
        std::lround(static_cast<double>(pos) * static_cast<double>(tiny) / real));
    layers.push_back(l < 0 ? at - (tiny + 1) : at);
  }
  t["vision_config"]["num_hidden_layers"] = tiny;
  t["vision_feature_layers"] = layers;
}

std::vector<ArchEntry> VipLlavaArchs() {
  // llava-hf/vip-llava-7b-hf (its text_config's llama sizes written out)
  const json example = json::parse(R"({"model_type":"vipllava","image_token_index":32000,
      "pad_token_id":32001,"projector_hidden_act":"gelu","projector_layernorm_eps":1e-5,
      "tie_word_embeddings":false,"vision_feature_layers":[-2,-5,-8,-11,6],
      "text_config":{"model_type":"llama","hidden_size":4096,"intermediate_size":11008,
        "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
        "vocab_size":32064,"max_position_embeddings":4096,"rms_norm_eps":1e-5,
        "rope_theta":10000.0,"hidden_act":"silu","tie_word_embeddings":false,
        "pad_token_id":32001},
      "vision_config":{"model_type":"clip_vision_model","hidden_size":1024,"image_size":336,
        "intermediate_size":4096,"num_attention_heads":16,"num_hidden_layers":24,
        "patch_size":14,"projection_dim":768,"hidden_act":"quick_gelu","layer_norm_eps":1e-5}})");
  return {LlavaLikeEntry("VipLlavaForConditionalGeneration", "vipllava", TextHeadKind::kCausalLM,
                         "image-text-to-text", example, ParseVipLlava, ScaleVipLlavaTower),
          LlavaLikeEntry("VipLlavaModel", "vipllava", TextHeadKind::kBase, "feature-extraction",
                         example, ParseVipLlava, ScaleVipLlavaTower)};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(VipLlava, VipLlavaArchs);

}  // namespace ts::zoo::internal
