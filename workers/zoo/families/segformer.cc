// segformer (modeling_segformer.py): SegformerModel (last_hidden_state, the last stage's map),
// SegformerForImageClassification (`classifier` over the mean of the last stage's tokens) and
// SegformerForSemanticSegmentation (the all-MLP decode head, heads/semantic_segmentation.cc) on
// the Mix Transformer trunk (trunks/vision_segformer.h). Config: num_channels,
// num_encoder_blocks and its per-stage lists depths, sr_ratios, hidden_sizes, patch_sizes,
// strides, num_attention_heads, mlp_ratios; hidden_act, decoder_hidden_size,
// semantic_loss_ignore_index, reshape_last_stage (only true: false leaves the last stage as
// tokens, which the heads here do not read), image_size (the batch's size: the model takes any).
#include "workers/zoo/families/segformer.h"

#include <algorithm>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_segformer.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct SegformerConfig {
  SegformerRecipe recipe;
  int64_t decoder_hidden = 256, ignore_index = 255, num_labels = 2;
};

StatusOr<std::vector<double>> SegformerDoubleList(const json& config, const std::string& field,
                                                  std::vector<double> def) {
  auto it = config.find(field);
  if (it == config.end() || it->is_null()) return def;
  if (!it->is_array()) return InvalidArgumentError(field + ": expected array of numbers");
  std::vector<double> out;
  for (const auto& v : *it) {
    if (!v.is_number()) return InvalidArgumentError(field + ": expected array of numbers");
    if (!(v.get<double>() > 0)) return InvalidArgumentError(field + ": must be positive");
    out.push_back(v.get<double>());
  }
  return out;
}

}  // namespace

StatusOr<SegformerRecipe> ParseMixTransformer(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  SegformerRecipe s;
  TS_ASSIGN_OR_RETURN(s.channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(s.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(const int64_t blocks, PositiveInt(r, "num_encoder_blocks", 4));
  const std::pair<const char*, std::vector<int64_t>*> lists[] = {{"depths", &s.depths},
                                                                 {"sr_ratios", &s.sr_ratios},
                                                                 {"hidden_sizes", &s.hidden_sizes},
                                                                 {"patch_sizes", &s.patch_sizes},
                                                                 {"strides", &s.strides},
                                                                 {"num_attention_heads", &s.heads}};
  const std::vector<int64_t> defaults[] = {{2, 2, 2, 2}, {8, 4, 2, 1}, {32, 64, 160, 256},
                                           {7, 3, 3, 3}, {4, 2, 2, 2}, {1, 2, 5, 8}};
  for (size_t i = 0; i < std::size(lists); ++i) {
    TS_ASSIGN_OR_RETURN(*lists[i].second, IntList(config, lists[i].first, defaults[i]));
    TS_RETURN_IF_ERROR(CheckLen(lists[i].first, *lists[i].second, blocks));
    TS_RETURN_IF_ERROR(CheckAllPositive(lists[i].first, *lists[i].second));
  }
  for (int64_t i = 0; i < blocks; ++i) {
    if (s.hidden_sizes[i] % s.heads[i] != 0)
      return r.Error("num_attention_heads", "entry " + std::to_string(i) +
                                                " must divide hidden_sizes' (" +
                                                std::to_string(s.hidden_sizes[i]) + " % " +
                                                std::to_string(s.heads[i]) + " != 0)");
  }
  TS_ASSIGN_OR_RETURN(s.mlp_ratios, SegformerDoubleList(config, "mlp_ratios", {4, 4, 4, 4}));
  if (static_cast<int64_t>(s.mlp_ratios.size()) != blocks)
    return r.Error("mlp_ratios", "expected " + std::to_string(blocks) + " entries, got " +
                                     std::to_string(s.mlp_ratios.size()));
  TS_ASSIGN_OR_RETURN(std::string act, r.String("hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(s.act, ParseActivation(act, "hidden_act"));
  for (int64_t i = 0; i < blocks; ++i) {
    if (s.MapSide(i) < 1) return r.Error("image_size", "too small for the patch embeddings");
  }
  return s;
}

// Every stage kept, with its kernel, stride, sr ratio and MLP ratio; one layer per stage, heads
// min(heads, 2) of width 8; the image the tiny profile's side, doubled until every stage's map
// is at least its sr ratio (the reduction conv's kernel).
Status ScaleMixTransformer(const SegformerRecipe& recipe, json& t) {
  SegformerRecipe s = recipe;
  std::vector<int64_t> heads, hidden, depths;
  for (int64_t i = 0; i < s.stages(); ++i) {
    heads.push_back(std::min<int64_t>(s.heads[i], 2));
    hidden.push_back(heads.back() * 8);
    depths.push_back(1);
  }
  t["num_attention_heads"] = heads;
  t["hidden_sizes"] = hidden;
  t["depths"] = depths;
  s.image_size = TinyProfile::kImageSize;
  auto fits = [&] {
    for (int64_t i = 0; i < s.stages(); ++i)
      if (s.MapSide(i) < s.sr_ratios[i]) return false;
    return true;
  };
  while (!fits() && s.image_size < 1024) s.image_size *= 2;
  if (!fits()) return InvalidArgumentError("sr_ratios: larger than the stages' maps");
  t["image_size"] = s.image_size;
  SetTinyRunProfile(t, s.MapSide(0) * s.MapSide(0));
  return OkStatus();
}

namespace {

StatusOr<SegformerConfig> ParseSegformer(const json& config) {
  SegformerConfig c;
  TS_ASSIGN_OR_RETURN(c.recipe, ParseMixTransformer(config));
  ConfigReader r(config);
  TS_ASSIGN_OR_RETURN(c.decoder_hidden, PositiveInt(r, "decoder_hidden_size", 256));
  TS_ASSIGN_OR_RETURN(c.ignore_index, r.Int("semantic_loss_ignore_index", 255));
  TS_ASSIGN_OR_RETURN(bool reshape, r.Bool("reshape_last_stage", true));
  if (!reshape) return r.Error("reshape_last_stage", "false is not supported by the zoo");
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleSegformer(const json& config) {
  TS_ASSIGN_OR_RETURN(SegformerConfig c, ParseSegformer(config));
  json t = config;
  TS_RETURN_IF_ERROR(ScaleMixTransformer(c.recipe, t));
  t["decoder_hidden_size"] = 16;
  ScaleLabels(t, c.num_labels);
  return t;
}

enum class SegformerHead { kModel, kClassification, kSegmentation };

decltype(ArchEntry::build) BuildSegformer(SegformerHead head) {
  return [head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(SegformerConfig c, ParseSegformer(spec.tiny_config));
    if (head != SegformerHead::kModel) c.recipe.prefix = "segformer.";
    auto trunk = std::make_unique<SegformerTrunk>(c.recipe);
    std::unique_ptr<ImageHead> h;
    switch (head) {
      case SegformerHead::kModel:
        h = VisionHeadFor(VisionHeadKind::kFeatures, *trunk, c.num_labels);
        break;
      case SegformerHead::kClassification:
        h = VisionHeadFor(VisionHeadKind::kClassification, *trunk, c.num_labels);
        break;
      case SegformerHead::kSegmentation:
        h = SegformerDecodeHead({.stage_widths = c.recipe.hidden_sizes,
                                 .decoder_hidden = c.decoder_hidden,
                                 .num_labels = c.num_labels,
                                 .ignore_index = c.ignore_index,
                                 .image_size = c.recipe.image_size});
        break;
    }
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(h));
  };
}

std::vector<ArchEntry> SegformerArchs() {
  // nvidia/segformer-b0-finetuned-ade-512-512 (150 ADE20k labels; nvidia/mit-b0 is the
  // ImageNet-1k classifier and the base encoder).
  const json example = {{"model_type", "segformer"},
                        {"num_channels", 3},
                        {"num_encoder_blocks", 4},
                        {"depths", {2, 2, 2, 2}},
                        {"sr_ratios", {8, 4, 2, 1}},
                        {"hidden_sizes", {32, 64, 160, 256}},
                        {"patch_sizes", {7, 3, 3, 3}},
                        {"strides", {4, 2, 2, 2}},
                        {"num_attention_heads", {1, 2, 5, 8}},
                        {"mlp_ratios", {4, 4, 4, 4}},
                        {"hidden_act", "gelu"},
                        {"hidden_dropout_prob", 0.0},
                        {"attention_probs_dropout_prob", 0.0},
                        {"classifier_dropout_prob", 0.1},
                        {"initializer_range", 0.02},
                        {"drop_path_rate", 0.1},
                        {"layer_norm_eps", 1e-6},
                        {"decoder_hidden_size", 256},
                        {"semantic_loss_ignore_index", 255},
                        {"reshape_last_stage", true},
                        {"image_size", 224},
                        {"num_labels", 150}};
  json base = example;
  base.erase("num_labels");
  json classifier = example;
  classifier["num_labels"] = 1000;
  return {{{"SegformerModel", "segformer", "image-feature-extraction"},
           WithArchitecture(base, "SegformerModel"),
           ScaleSegformer,
           BuildSegformer(SegformerHead::kModel)},
          {{"SegformerForImageClassification", "segformer", "image-classification"},
           WithArchitecture(classifier, "SegformerForImageClassification"),
           ScaleSegformer,
           BuildSegformer(SegformerHead::kClassification)},
          {{"SegformerForSemanticSegmentation", "segformer", "image-segmentation"},
           WithArchitecture(example, "SegformerForSemanticSegmentation"),
           ScaleSegformer,
           BuildSegformer(SegformerHead::kSegmentation)}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Segformer, SegformerArchs);

}  // namespace ts::zoo::internal
