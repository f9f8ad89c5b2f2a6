// glpn (modeling_glpn.py): GLPNModel (last_hidden_state, the last stage's map) and
// GLPNForDepthEstimation (GLPNDecoder and GLPNDepthEstimationHead over every stage's map,
// SiLogLoss: heads/depth_estimation.cc) on SegFormer's Mix Transformer trunk
// (trunks/vision_segformer.h; GLPN's encoder is SegFormer's, always reshaped to maps). Config:
// the Mix Transformer fields (families/segformer.h), decoder_hidden_size, max_depth,
// head_in_index.
#include <algorithm>

#include "workers/zoo/families/segformer.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct GlpnConfig {
  SegformerRecipe recipe;
  int64_t decoder_hidden = 64, head_in_index = -1;
  double max_depth = 10;
};

StatusOr<GlpnConfig> ParseGlpn(const json& config) {
  GlpnConfig c;
  TS_ASSIGN_OR_RETURN(c.recipe, ParseMixTransformer(config));
  ConfigReader r(config);
  TS_ASSIGN_OR_RETURN(c.decoder_hidden, PositiveInt(r, "decoder_hidden_size", 64));
  if (c.decoder_hidden % 2 != 0) return r.Error("decoder_hidden_size", "must be even");
  TS_ASSIGN_OR_RETURN(c.max_depth, r.Double("max_depth", 10));
  if (!(c.max_depth > 0)) return r.Error("max_depth", "must be positive");
  TS_ASSIGN_OR_RETURN(c.head_in_index, r.Int("head_in_index", -1));
  const int64_t n = c.recipe.stages();
  if (c.head_in_index < -n || c.head_in_index >= n)
    return r.Error("head_in_index", "out of range for " + std::to_string(n) + " decoder stages");
  // The decoder fuses each stage with the previous one upsampled x2: the maps must halve.
  for (int64_t i = 1; i < n; ++i) {
    if (c.recipe.MapSide(i - 1) != 2 * c.recipe.MapSide(i))
      return r.Error("strides", "the decoder needs every stage after the first to halve the map");
  }
  return c;
}

StatusOr<json> ScaleGlpn(const json& config) {
  TS_ASSIGN_OR_RETURN(GlpnConfig c, ParseGlpn(config));
  json t = config;
  TS_RETURN_IF_ERROR(ScaleMixTransformer(c.recipe, t));
  t["decoder_hidden_size"] = 16;
  TS_RETURN_IF_ERROR(ParseGlpn(t).status());  // the tiny image must still halve per stage
  return t;
}

decltype(ArchEntry::build) BuildGlpn(bool depth) {
  return [depth](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(GlpnConfig c, ParseGlpn(spec.tiny_config));
    if (depth) c.recipe.prefix = "glpn.";
    auto trunk = std::make_unique<SegformerTrunk>(c.recipe);
    std::unique_ptr<ImageHead> head;
    if (depth) {
      std::vector<int64_t> sides;
      for (int64_t i = 0; i < c.recipe.stages(); ++i) sides.push_back(c.recipe.MapSide(i));
      head = GlpnDepthHead({.stage_widths = c.recipe.hidden_sizes,
                            .stage_sides = sides,
                            .decoder_hidden = c.decoder_hidden,
                            .head_in_index = c.head_in_index,
                            .max_depth = c.max_depth});
    } else {
      head = VisionHeadFor(VisionHeadKind::kFeatures, *trunk, /*num_labels=*/0);
    }
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
  };
}

std::vector<ArchEntry> GlpnArchs() {
  // vinvino02/glpn-kitti (the MiT-b4 encoder; KITTI's max depth 80 m).
  const json example = {{"model_type", "glpn"},
                        {"num_channels", 3},
                        {"num_encoder_blocks", 4},
                        {"depths", {3, 8, 27, 3}},
                        {"sr_ratios", {8, 4, 2, 1}},
                        {"hidden_sizes", {64, 128, 320, 512}},
                        {"patch_sizes", {7, 3, 3, 3}},
                        {"strides", {4, 2, 2, 2}},
                        {"num_attention_heads", {1, 2, 5, 8}},
                        {"mlp_ratios", {4, 4, 4, 4}},
                        {"hidden_act", "gelu"},
                        {"hidden_dropout_prob", 0.0},
                        {"attention_probs_dropout_prob", 0.0},
                        {"initializer_range", 0.02},
                        {"drop_path_rate", 0.1},
                        {"layer_norm_eps", 1e-6},
                        {"decoder_hidden_size", 64},
                        {"max_depth", 80},
                        {"head_in_index", -1}};
  return {{{"GLPNModel", "glpn", "image-feature-extraction"},
           WithArchitecture(example, "GLPNModel"),
           ScaleGlpn,
           BuildGlpn(false)},
          {{"GLPNForDepthEstimation", "glpn", "depth-estimation"},
           WithArchitecture(example, "GLPNForDepthEstimation"),
           ScaleGlpn,
           BuildGlpn(true)}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Glpn, GlpnArchs);

}  // namespace ts::zoo::internal
