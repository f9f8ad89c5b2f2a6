// convnext: ConvNextModel, ConvNextForImageClassification, ConvNextBackbone. Config -> recipe
// (trunks/vision_convnext.h) and the example config; convnextv2.cc derives from it (convnext.h).
#include "workers/zoo/families/convnext.h"

#include <algorithm>

#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_convnext.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

// The recipe and the classifier's label count.
struct ConvNextConfig : ConvNextRecipe {
  int64_t num_labels = 2;
};

// `v2`: ConvNextV2Config, which has no layer_scale_init_value (no layer scale) and adds GRN.
StatusOr<ConvNextConfig> ParseConvNext(const json& config, bool v2) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  ConvNextConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.patch_size, PositiveInt(r, "patch_size", 4));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.hidden_sizes, IntList(config, "hidden_sizes", {96, 192, 384, 768}));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {3, 3, 9, 3}));
  TS_RETURN_IF_ERROR(CheckAllPositive("hidden_sizes", c.hidden_sizes));
  TS_RETURN_IF_ERROR(CheckAllPositive("depths", c.depths));
  if (c.hidden_sizes.empty()) return InvalidArgumentError("hidden_sizes: must not be empty");
  TS_ASSIGN_OR_RETURN(int64_t stages,
                      PositiveInt(r, "num_stages", static_cast<int64_t>(c.hidden_sizes.size())));
  TS_RETURN_IF_ERROR(CheckLen("hidden_sizes", c.hidden_sizes, static_cast<size_t>(stages)));
  TS_RETURN_IF_ERROR(CheckLen("depths", c.depths, static_cast<size_t>(stages)));
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(c.layer_norm_eps, r.Double("layer_norm_eps", 1e-12));
  if (v2) {
    c.layer_scale_init_value = 0.0;
    c.grn = true;
  } else {
    TS_ASSIGN_OR_RETURN(c.layer_scale_init_value, r.Double("layer_scale_init_value", 1e-6));
  }
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

}  // namespace

StatusOr<json> ScaleConvNext(const json& config, bool v2) {
  TS_ASSIGN_OR_RETURN(ConvNextConfig c, ParseConvNext(config, v2));
  json t = config;
  const int64_t last = c.hidden_sizes.back();
  std::vector<int64_t> hs, ds;
  for (int64_t h : c.hidden_sizes) hs.push_back(ScaleRatio(h, last, 64, 8));
  for (int64_t d : c.depths) ds.push_back(std::min<int64_t>(d, 1));
  t["hidden_sizes"] = hs;
  t["depths"] = ds;
  t["image_size"] = TinyProfile::kImageSize;
  t["patch_size"] = std::min<int64_t>(c.patch_size, 4);
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

StatusOr<PooledVisionTrunk> ConvNextTrunkFor(const json& config, const std::string& prefix,
                                             bool v2) {
  TS_ASSIGN_OR_RETURN(ConvNextConfig c, ParseConvNext(config, v2));
  c.prefix = prefix;
  return PooledVisionTrunk{std::make_unique<ConvNextTrunk>(c), c.num_labels};
}

ArchEntry ConvNextBackboneEntry(const std::string& name, const std::string& model_type,
                                json example, bool v2) {
  const std::string arch = name + "Backbone";
  example = WithArchitecture(example, arch);
  example.erase("num_labels");
  example["out_features"] = {"stage4"};
  auto scale = [v2](const json& config) -> StatusOr<json> {
    TS_ASSIGN_OR_RETURN(ConvNextConfig c, ParseConvNext(config, v2));
    const auto stages = static_cast<int64_t>(c.hidden_sizes.size());
    TS_RETURN_IF_ERROR(CheckLastStageBackbone(config, stages));
    TS_ASSIGN_OR_RETURN(json t, ScaleConvNext(config, v2));
    t.erase("num_labels");
    return t;
  };
  auto build = [v2](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(ConvNextConfig c, ParseConvNext(spec.tiny_config, v2));
    const auto stages = static_cast<int64_t>(c.hidden_sizes.size());
    TS_RETURN_IF_ERROR(CheckLastStageBackbone(spec.tiny_config, stages));
    c.prefix = "";
    c.final_layernorm = false;
    auto trunk = std::make_unique<ConvNextTrunk>(c);
    auto head = BackboneHead({.prefix_tokens = -1,
                              .norm = "hidden_states_norms.stage" + std::to_string(stages),
                              .map_shape = trunk->LastHiddenShape()});
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
  };
  return {{arch, model_type, "backbone"}, std::move(example), scale, build};
}

json ConvNextExample() {  // facebook/convnext-tiny-224
  return {{"model_type", "convnext"},
          {"num_channels", 3},
          {"patch_size", 4},
          {"num_stages", 4},
          {"hidden_sizes", {96, 192, 384, 768}},
          {"depths", {3, 3, 9, 3}},
          {"hidden_act", "gelu"},
          {"layer_norm_eps", 1e-12},
          {"layer_scale_init_value", 1e-6},
          {"drop_path_rate", 0.0},
          {"image_size", 224},
          {"num_labels", 1000}};
}

namespace {

std::vector<ArchEntry> ConvNextArchs() {
  std::vector<ArchEntry> out = PooledVisionArchs(
      {"ConvNext", "convnext", "convnext."}, ConvNextExample(),
      [](const json& c) { return ScaleConvNext(c, false); },
      [](const json& c, const std::string& p) { return ConvNextTrunkFor(c, p, false); });
  out.push_back(ConvNextBackboneEntry("ConvNext", "convnext", ConvNextExample(), false));
  return out;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(ConvNext, ConvNextArchs);

}  // namespace ts::zoo::internal
