// donut-swin (modular_donut_swin.py): DonutSwinModel and DonutSwinForImageClassification, the
// Swin trunk (trunks/vision_swin.h) with what Donut changes: no final `layernorm` (the pooler,
// AdaptiveAvgPool1d(1), and the classifier read the last stage's output as it is), the base
// model under `donut.` in the classifier, and 4.x Swin's module names, which DonutSwin keeps
// where transformers 5's Swin renamed them (`attention.self.query / key / value`,
// `attention.self.relative_position_bias_table`, `attention.output.dense`, `intermediate.dense`,
// `output.dense`: SwinRecipe::donut_names). DonutSwinSelfAttention registers
// `relative_position_index` as a persistent buffer (nn.Buffer), so every block's index is a
// state_dict entry with its computed values. DonutSwinConfig reads the fields SwinConfig reads
// (ParseSwin, families/swin.h; use_absolute_embeddings true refused as for Swin). Modelled on
// naver-clova-ix/donut-base's encoder.
#include <cmath>

#include "workers/zoo/families/swin.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/trunks/vision.h"
#include "workers/zoo/trunks/vision_swin.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

StatusOr<PooledVisionTrunk> DonutSwinTrunkFor(const json& config, const std::string& prefix) {
  TS_ASSIGN_OR_RETURN(SwinConfig c, ParseSwin(config));
  c.prefix = prefix;
  c.final_norm = false;
  c.donut_names = true;
  return PooledVisionTrunk{std::make_unique<SwinTrunk>(c), c.num_labels};
}

// create_relative_position_index over a ws x ws window: for tokens i, j (row-major),
// (h_i - h_j + ws - 1) * (2 ws - 1) + (w_i - w_j + ws - 1), as int64 [ws^2, ws^2].
StateDictEntry DonutRelativePositionIndex(const std::string& name, int64_t ws) {
  const int64_t n = ws * ws;
  StateDictEntry e{name, {n, n}, at::kLong, ""};
  e.values.reserve(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t dh = i / ws - j / ws + ws - 1, dw = i % ws - j % ws + ws - 1;
      e.values.push_back(static_cast<double>(dh * (2 * ws - 1) + dw));
    }
  }
  return e;
}

// Each block's index buffer, after the weights; the window is the config's (the table has
// (2 ws - 1)^2 rows), whatever a small stage attends over.
void AddDonutRelativePositionIndices(StateDictBuilder& sd) {
  const std::string table = "relative_position_bias_table";
  for (const auto& [name, shape] : sd.weights()) {
    if (name.size() < table.size() ||
        name.compare(name.size() - table.size(), table.size(), table) != 0) {
      continue;
    }
    const auto side = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(shape[0]))));
    sd.Add(DonutRelativePositionIndex(
        name.substr(0, name.size() - table.size()) + "relative_position_index", (side + 1) / 2));
  }
}

std::vector<ArchEntry> DonutSwinArchs() {
  // naver-clova-ix/donut-base's encoder (its image_size is [2560, 1920]; the zoo's Swin trunk
  // takes square images, so 2560 here: a list is refused naming image_size).
  const json donut = {{"model_type", "donut-swin"},
                      {"image_size", 2560},
                      {"patch_size", 4},
                      {"num_channels", 3},
                      {"embed_dim", 128},
                      {"depths", {2, 2, 14, 2}},
                      {"num_heads", {4, 8, 16, 32}},
                      {"window_size", 10},
                      {"mlp_ratio", 4.0},
                      {"qkv_bias", true},
                      {"hidden_act", "gelu"},
                      {"layer_norm_eps", 1e-5},
                      {"use_absolute_embeddings", false},
                      {"drop_path_rate", 0.1},
                      {"initializer_range", 0.02},
                      {"num_labels", 2}};
  std::vector<ArchEntry> archs =
      PooledVisionArchs({"DonutSwin", "donut-swin", "donut."}, donut, ScaleSwin, DonutSwinTrunkFor);
  for (ArchEntry& a : archs) {
    a.state_dict.extra = AddDonutRelativePositionIndices;
    // transformers' task table has DonutSwinModel under feature-extraction only.
    if (a.info.arch == "DonutSwinModel") a.info.task = "feature-extraction";
  }
  return archs;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(DonutSwin, DonutSwinArchs);

}  // namespace ts::zoo::internal
