// llava_next_video (modular_llava_next_video.py): LlavaNextVideoForConditionalGeneration
// (image-text-to-text) and LlavaNextVideoModel. Its image path is LLaVA-NeXT's
// (families/llava_next.cc: get_image_features and pack_image_features unchanged, the same
// tower, projector and image_newline); its videos (pixel_values_videos: every frame through the
// tower, LlavaNextVideoPooler's average or max pooling of spatial_pool_stride, the projector, at
// video_token_index) are a second input the zoo's batches do not carry, so what runs is the image
// path, which the pipeline's image-text-to-text task uses. LlavaNextVideoConfig's defaults differ
// from LLaVA-NeXT's in image_token_index (32001; video_token_index 32000). spatial_pool_mode
// "conv" (a Conv2d with weights the image path never reads) is refused naming the field; the
// average and max pools have no weights. The tiny video token moves into the tiny vocabulary
// beside the image token.
#include <string>
#include <vector>

#include "workers/zoo/families/llava.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

StatusOr<VisionLanguageRecipe> ParseLlavaNextVideo(const json& config, TextHeadKind head) {
  ConfigReader r(config);
  json c = config;
  if (c.is_object() && !r.Has("image_token_index")) c["image_token_index"] = 32001;
  TS_ASSIGN_OR_RETURN(VisionLanguageRecipe v, ParseLlavaNext(c, head));
  TS_ASSIGN_OR_RETURN(std::string pool, r.String("spatial_pool_mode", "average"));
  if (pool != "average" && pool != "max") {
    return r.Error("spatial_pool_mode",
                   "only 'average' and 'max' are supported by the zoo (the videos' pooler has "
                   "no weights then), got '" +
                       pool + "'");
  }
  TS_ASSIGN_OR_RETURN(int64_t stride, r.Int("spatial_pool_stride", 2));
  if (stride <= 0) return r.Error("spatial_pool_stride", "must be positive");
  return v;
}

void ScaleLlavaNextVideo(const VisionLanguageRecipe& v, json& t) {
  ScaleLlavaNextTower(v, t);
  const int64_t vocab = t["text_config"]["vocab_size"].get<int64_t>();
  t["video_token_index"] = vocab - 4;  // beside the image token (vocab - 2 or - 3)
}

std::vector<ArchEntry> LlavaNextVideoArchs() {
  // modelled on llava-hf/LLaVA-NeXT-Video-7B-hf (its text_config's llama sizes written out)
  const json example = json::parse(R"({"model_type":"llava_next_video","image_token_index":32001,
      "video_token_index":32000,"projector_hidden_act":"gelu","tie_word_embeddings":false,
      "vision_feature_layer":-2,"vision_feature_select_strategy":"default",
      "spatial_pool_mode":"average","spatial_pool_stride":2,"image_seq_length":576,
      "video_seq_length":288,
      "image_grid_pinpoints":[[336,672],[672,336],[672,672],[1008,336],[336,1008]],
      "text_config":{"model_type":"llama","hidden_size":4096,"intermediate_size":11008,
        "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
        "vocab_size":32064,"max_position_embeddings":4096,"rms_norm_eps":1e-5,
        "rope_theta":10000.0,"hidden_act":"silu","tie_word_embeddings":false},
      "vision_config":{"model_type":"clip_vision_model","hidden_size":1024,"image_size":336,
        "intermediate_size":4096,"num_attention_heads":16,"num_hidden_layers":24,
        "patch_size":14,"projection_dim":768,"hidden_act":"quick_gelu","layer_norm_eps":1e-5}})");
  return {LlavaLikeEntry("LlavaNextVideoForConditionalGeneration", "llava_next_video",
                         TextHeadKind::kCausalLM, "image-text-to-text", example,
                         ParseLlavaNextVideo, ScaleLlavaNextVideo),
          LlavaLikeEntry("LlavaNextVideoModel", "llava_next_video", TextHeadKind::kBase,
                         "feature-extraction", example, ParseLlavaNextVideo, ScaleLlavaNextVideo)};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(LlavaNextVideo, LlavaNextVideoArchs);

}  // namespace ts::zoo::internal
