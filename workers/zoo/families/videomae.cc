// videomae (modeling_videomae.py): VideoMAEModel (last_hidden_state alone) and
// VideoMAEForVideoClassification (`classifier` over fc_norm(mean of the tokens), or token 0 after
// `layernorm` without mean pooling; cross entropy, MSE for one label) on the video trunk
// (trunks/vision_video.h). The batch's pixel_values are [B, num_frames, C, H, W]. Config: the
// ViT fields (hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, hidden_act,
// layer_norm_eps, image_size, patch_size, num_channels, qkv_bias: here the q_bias / v_bias
// parameters), num_frames, tubelet_size, use_mean_pooling. VideoMAEForPreTraining
// (pretraining: heads/video_pretraining.h) also reads decoder_hidden_size,
// decoder_num_attention_heads, decoder_intermediate_size, decoder_num_hidden_layers and
// norm_pix_loss.
#include <algorithm>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/heads/video_pretraining.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_transformer.h"
#include "workers/zoo/trunks/vision_video.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct VideoMaeConfig {
  VideoMaeRecipe recipe;
  int64_t num_labels = 2;
};

StatusOr<VideoMaeConfig> ParseVideoMae(const json& config) {
  TS_ASSIGN_OR_RETURN(VitConfig v, ParseVitConfig(config));
  ConfigReader r(config);
  VideoMaeConfig c;
  VideoMaeRecipe& m = c.recipe;
  m.image_size = v.image_size;
  m.patch_size = v.patch_size;
  m.channels = v.num_channels;
  TS_ASSIGN_OR_RETURN(m.frames, r.Int("num_frames", 16));
  if (m.frames <= 0) return r.Error("num_frames", "must be positive");
  TS_ASSIGN_OR_RETURN(m.tubelet, r.Int("tubelet_size", 2));
  if (m.tubelet <= 0) return r.Error("tubelet_size", "must be positive");
  if (m.frames % m.tubelet != 0)
    return r.Error("num_frames", "must be a multiple of tubelet_size (" + std::to_string(m.frames) +
                                     " % " + std::to_string(m.tubelet) + " != 0)");
  TS_ASSIGN_OR_RETURN(m.mean_pooling, r.Bool("use_mean_pooling", true));
  PreLnEncoderRecipe& e = m.encoder;
  e.hidden = v.hidden_size;
  e.intermediate = v.intermediate_size;
  e.layers = v.num_hidden_layers;
  e.heads = v.num_attention_heads;
  e.act = v.hidden_act;
  e.eps = v.layer_norm_eps;
  e.qkv_bias = false;  // the Linears never have biases; qkv_bias gives q_bias / v_bias
  e.qv_bias_params = v.qkv_bias;
  e.naming = VitV4EncoderNaming("encoder.layer.");
  c.num_labels = v.num_labels;
  return c;
}

// The ViT width policy (ScaleToTiny "vit"), then 4 frames (at least one tubelet) and a tubelet
// of at most 2.
StatusOr<json> ScaleVideoMae(const json& config) {
  TS_ASSIGN_OR_RETURN(VideoMaeConfig c, ParseVideoMae(config));
  TS_ASSIGN_OR_RETURN(json t, ScaleToTiny(config, "vit"));
  const int64_t tubelet = std::min<int64_t>(c.recipe.tubelet, 2);
  t["tubelet_size"] = tubelet;
  t["num_frames"] = std::max<int64_t>(tubelet, 4 / tubelet * tubelet);
  TS_ASSIGN_OR_RETURN(VideoMaeConfig tiny, ParseVideoMae(t));
  SetTinyRunProfile(t, tiny.recipe.Tokens());
  return t;
}

// VideoMAEForPreTraining's decoder: VideoMAE layers at the decoder_* sizes.
StatusOr<VideoPretrainingRecipe> ParseVideoMaeDecoder(const json& config,
                                                      const VideoMaeRecipe& encoder) {
  ConfigReader r(config);
  VideoPretrainingRecipe p;
  p.decoder = encoder.encoder;
  PreLnEncoderRecipe& d = p.decoder;
  TS_ASSIGN_OR_RETURN(d.hidden, r.Int("decoder_hidden_size", 384));
  TS_ASSIGN_OR_RETURN(d.heads, r.Int("decoder_num_attention_heads", 6));
  TS_ASSIGN_OR_RETURN(d.intermediate, r.Int("decoder_intermediate_size", 1536));
  TS_ASSIGN_OR_RETURN(d.layers, r.Int("decoder_num_hidden_layers", 4));
  for (const auto& [field, v] : {std::pair<const char*, int64_t>{"decoder_hidden_size", d.hidden},
                                 {"decoder_num_attention_heads", d.heads},
                                 {"decoder_intermediate_size", d.intermediate},
                                 {"decoder_num_hidden_layers", d.layers}}) {
    if (v <= 0) return r.Error(field, "must be positive");
  }
  if (d.hidden % d.heads != 0)
    return r.Error("decoder_num_attention_heads", "must divide decoder_hidden_size");
  d.naming.layers = "decoder.decoder_layers.";
  TS_ASSIGN_OR_RETURN(p.norm_pix_loss, r.Bool("norm_pix_loss", true));
  if (!p.norm_pix_loss && encoder.channels != 3)
    return r.Error("norm_pix_loss", "false needs 3 channels (transformers un-normalises RGB)");
  return p;
}

StatusOr<json> ScaleVideoMaePretraining(const json& config) {
  TS_ASSIGN_OR_RETURN(VideoMaeConfig c, ParseVideoMae(config));
  TS_ASSIGN_OR_RETURN(VideoPretrainingRecipe p, ParseVideoMaeDecoder(config, c.recipe));
  TS_ASSIGN_OR_RETURN(json t, ScaleVideoMae(config));
  const int64_t heads = std::min<int64_t>(p.decoder.heads, 2);
  t["decoder_num_attention_heads"] = heads;
  t["decoder_hidden_size"] = heads * 16;
  t["decoder_intermediate_size"] = heads * 16 * p.decoder.intermediate / p.decoder.hidden;
  t["decoder_num_hidden_layers"] = 1;
  t.erase("num_labels");
  return t;
}

StatusOr<std::unique_ptr<Model>> BuildVideoMaePretraining(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(VideoMaeConfig c, ParseVideoMae(spec.tiny_config));
  TS_ASSIGN_OR_RETURN(VideoPretrainingRecipe p, ParseVideoMaeDecoder(spec.tiny_config, c.recipe));
  c.recipe.prefix = "videomae.";
  return MakeVideoMaePretraining(std::move(spec), std::make_unique<VideoMaeTrunk>(c.recipe),
                                 std::move(p));
}

decltype(ArchEntry::build) BuildVideoMae(bool classifier) {
  return [classifier](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(VideoMaeConfig c, ParseVideoMae(spec.tiny_config));
    if (classifier) {
      c.recipe.prefix = "videomae.";
      c.recipe.fc_norm = true;
    }
    auto trunk = std::make_unique<VideoMaeTrunk>(c.recipe);
    auto head =
        VisionHeadFor(classifier ? VisionHeadKind::kClassification : VisionHeadKind::kFeatures,
                      *trunk, c.num_labels);
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
  };
}

std::vector<ArchEntry> VideoMaeArchs() {
  // MCG-NJU/videomae-base-finetuned-kinetics (400 Kinetics labels; MCG-NJU/videomae-base is the
  // pre-trained encoder).
  const json example = {
      {"model_type", "videomae"},  {"hidden_size", 768},       {"intermediate_size", 3072},
      {"num_attention_heads", 12}, {"num_hidden_layers", 12},  {"hidden_act", "gelu"},
      {"layer_norm_eps", 1e-12},   {"image_size", 224},        {"patch_size", 16},
      {"num_channels", 3},         {"num_frames", 16},         {"tubelet_size", 2},
      {"qkv_bias", true},          {"use_mean_pooling", true}, {"initializer_range", 0.02},
      {"num_labels", 400}};
  json base = example;
  base.erase("num_labels");
  // MCG-NJU/videomae-base: the pre-training checkpoint (its decoder, no mean pooling).
  json pretraining = base;
  pretraining["use_mean_pooling"] = false;
  pretraining["decoder_hidden_size"] = 384;
  pretraining["decoder_num_attention_heads"] = 6;
  pretraining["decoder_intermediate_size"] = 1536;
  pretraining["decoder_num_hidden_layers"] = 4;
  pretraining["norm_pix_loss"] = true;
  return {{{"VideoMAEForPreTraining", "videomae", "pretraining"},
           WithArchitecture(pretraining, "VideoMAEForPreTraining"),
           ScaleVideoMaePretraining,
           BuildVideoMaePretraining},
          {{"VideoMAEModel", "videomae", "image-feature-extraction"},
           WithArchitecture(base, "VideoMAEModel"),
           ScaleVideoMae,
           BuildVideoMae(false)},
          {{"VideoMAEForVideoClassification", "videomae", "video-classification"},
           WithArchitecture(example, "VideoMAEForVideoClassification"),
           ScaleVideoMae,
           BuildVideoMae(true)}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(VideoMae, VideoMaeArchs);

}  // namespace ts::zoo::internal
