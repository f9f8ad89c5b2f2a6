// pvt_v2 (modeling_pvt_v2.py): PvtV2Model (feature-extraction, its only task row in transformers'
// table, as CLIPVisionModel's; last_hidden_state the last stage's map after its norm),
// PvtV2ForImageClassification (`pvt_v2.`; the classifier on the mean of the last stage's tokens)
// and PvtV2Backbone (PvtV2Model's weights unprefixed; feature_maps the last stage's map, the
// default out_features). Per stage: an overlapping patch embedding
// (`encoder.patch_embeddings.I.proj`, padding patch // 2, then `layer_norm` with LayerNorm's
// default eps 1e-5), layers `encoder.block.I.J.` (layer_norm_1; attention.query on every token,
// attention.key / value on the tokens reduced by attention.sr (a sr_ratio / sr_ratio conv) and
// attention.layer_norm when sr_ratio > 1; attention.proj; layer_norm_2; mlp.dense1, the 3 x 3
// depthwise mlp.dwconv.dwconv, act, mlp.dense2), then `encoder.layer_norms.I` (eps 1e-5).
// linear_attention true (the pooled "AP" reduction) is refused naming the field. The trunk
// lives here: only this family uses it.
#include <algorithm>
#include <cmath>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct PvtV2Config {
  int64_t num_channels = 3, image_size = 224, num_labels = 2;
  std::vector<int64_t> hidden_sizes, depths, heads, sr_ratios, patch_sizes, strides;
  std::vector<double> mlp_ratios;
  double eps = 1e-6;
  bool qkv_bias = true;
  VisionActivation act;
};

StatusOr<PvtV2Config> ParsePvtV2(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  PvtV2Config c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.hidden_sizes, IntList(config, "hidden_sizes", {32, 64, 160, 256}));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {2, 2, 2, 2}));
  TS_ASSIGN_OR_RETURN(c.heads, IntList(config, "num_attention_heads", {1, 2, 5, 8}));
  TS_ASSIGN_OR_RETURN(c.sr_ratios, IntList(config, "sr_ratios", {8, 4, 2, 1}));
  TS_ASSIGN_OR_RETURN(c.patch_sizes, IntList(config, "patch_sizes", {7, 3, 3, 3}));
  TS_ASSIGN_OR_RETURN(c.strides, IntList(config, "strides", {4, 2, 2, 2}));
  TS_ASSIGN_OR_RETURN(int64_t blocks, PositiveInt(r, "num_encoder_blocks", 4));
  const std::pair<const char*, std::vector<int64_t>*> lists[] = {
      {"hidden_sizes", &c.hidden_sizes}, {"depths", &c.depths},
      {"num_attention_heads", &c.heads}, {"sr_ratios", &c.sr_ratios},
      {"patch_sizes", &c.patch_sizes},   {"strides", &c.strides}};
  for (const auto& [name, v] : lists) {
    TS_RETURN_IF_ERROR(CheckAllPositive(name, *v));
    TS_RETURN_IF_ERROR(CheckLen(name, *v, static_cast<size_t>(blocks)));
  }
  for (size_t i = 0; i < c.hidden_sizes.size(); ++i) {
    if (c.hidden_sizes[i] % c.heads[i] != 0)
      return InvalidArgumentError("num_attention_heads: " + std::to_string(c.heads[i]) +
                                  " must divide hidden size " + std::to_string(c.hidden_sizes[i]));
  }
  if (!config.contains("mlp_ratios")) {
    c.mlp_ratios = {8, 8, 4, 4};
  } else if (!config["mlp_ratios"].is_array()) {
    return r.Error("mlp_ratios", "expected a list of numbers");
  } else {
    for (const auto& m : config["mlp_ratios"]) {
      if (!m.is_number() || m.get<double>() <= 0)
        return r.Error("mlp_ratios", "expected positive numbers");
      c.mlp_ratios.push_back(m.get<double>());
    }
  }
  if (c.mlp_ratios.size() != static_cast<size_t>(blocks))
    return r.Error("mlp_ratios", "expected " + std::to_string(blocks) + " entries");
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_eps", 1e-6));
  if (c.eps <= 0) return r.Error("layer_norm_eps", "must be > 0");
  TS_ASSIGN_OR_RETURN(c.qkv_bias, r.Bool("qkv_bias", true));
  TS_ASSIGN_OR_RETURN(bool linear, r.Bool("linear_attention", false));
  if (linear) return r.Error("linear_attention", "true is not supported by the zoo");
  TS_ASSIGN_OR_RETURN(bool reshape, r.Bool("reshape_last_stage", true));
  if (!reshape) return r.Error("reshape_last_stage", "false is not supported by the zoo");
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

class PvtV2Trunk : public VisionTrunk {
 public:
  PvtV2Trunk(PvtV2Config c, std::string prefix)
      : VisionTrunk(c.num_channels, c.image_size), c_(std::move(c)), pre_(std::move(prefix)) {
    side_ = c_.image_size;
    for (size_t i = 0; i < c_.hidden_sizes.size(); ++i) {
      const int64_t h = c_.hidden_sizes[i], k = c_.patch_sizes[i];
      const int64_t in = i == 0 ? c_.num_channels : c_.hidden_sizes[i - 1];
      const std::string e = pre_ + "encoder.patch_embeddings." + std::to_string(i) + ".";
      Add(e + "proj.weight", {h, in, k, k});
      Add(e + "proj.bias", {h});
      Add(e + "layer_norm.weight", {h});
      Add(e + "layer_norm.bias", {h});
      side_ = (side_ + 2 * (k / 2) - k) / c_.strides[i] + 1;
      const auto inner = static_cast<int64_t>(static_cast<double>(h) * c_.mlp_ratios[i]);
      for (int64_t j = 0; j < c_.depths[i]; ++j) {
        const std::string l = Layer(i, j);
        Add(l + "layer_norm_1.weight", {h});
        Add(l + "layer_norm_1.bias", {h});
        for (const char* m : {"query", "key", "value"}) {
          Add(l + "attention." + m + ".weight", {h, h});
          if (c_.qkv_bias) Add(l + "attention." + m + ".bias", {h});
        }
        Add(l + "attention.proj.weight", {h, h});
        Add(l + "attention.proj.bias", {h});
        const int64_t sr = c_.sr_ratios[i];
        if (sr > 1) {
          Add(l + "attention.sr.weight", {h, h, sr, sr});
          Add(l + "attention.sr.bias", {h});
          Add(l + "attention.layer_norm.weight", {h});
          Add(l + "attention.layer_norm.bias", {h});
        }
        Add(l + "layer_norm_2.weight", {h});
        Add(l + "layer_norm_2.bias", {h});
        Add(l + "mlp.dense1.weight", {inner, h});
        Add(l + "mlp.dense1.bias", {inner});
        Add(l + "mlp.dwconv.dwconv.weight", {inner, 1, 3, 3});
        Add(l + "mlp.dwconv.dwconv.bias", {inner});
        Add(l + "mlp.dense2.weight", {h, inner});
        Add(l + "mlp.dense2.bias", {h});
      }
      const std::string n = pre_ + "encoder.layer_norms." + std::to_string(i) + ".";
      Add(n + "weight", {h});
      Add(n + "bias", {h});
    }
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    auto lin = [&](const std::string& p, const at::Tensor& x) {
      const std::string b = p + ".bias";
      return nn::Linear(x, GetWeight(w, p + ".weight"), w.count(b) ? w.at(b) : at::Tensor());
    };
    auto ln = [&](const std::string& p, const at::Tensor& x, double eps) {
      return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), eps);
    };
    at::Tensor x = pixel_values;
    const int64_t b = pixel_values.size(0);
    for (size_t i = 0; i < c_.hidden_sizes.size(); ++i) {
      const int64_t h = c_.hidden_sizes[i], k = c_.patch_sizes[i], nh = c_.heads[i];
      const int64_t hd = h / nh, sr = c_.sr_ratios[i];
      const std::string e = pre_ + "encoder.patch_embeddings." + std::to_string(i) + ".";
      x = nn::Conv2d(x, GetWeight(w, e + "proj.weight"), GetWeight(w, e + "proj.bias"),
                     c_.strides[i], k / 2);
      const int64_t ht = x.size(2), wd = x.size(3), s = ht * wd;
      x = ln(e + "layer_norm", x.flatten(2).transpose(1, 2), 1e-5);
      for (int64_t j = 0; j < c_.depths[i]; ++j) {
        const std::string l = Layer(i, j);
        at::Tensor y = ln(l + "layer_norm_1", x, c_.eps);
        at::Tensor kv = y;
        if (sr > 1) {  // the spatial reduction of the keys and values
          kv = y.transpose(1, 2).reshape({b, h, ht, wd});
          kv = nn::Conv2d(kv, GetWeight(w, l + "attention.sr.weight"),
                          GetWeight(w, l + "attention.sr.bias"), sr);
          kv = ln(l + "attention.layer_norm", kv.flatten(2).transpose(1, 2), c_.eps);
        }
        auto heads = [&](const at::Tensor& t) {
          return t.view({b, t.size(1), nh, hd}).transpose(1, 2);
        };
        at::Tensor ctx =
            nn::Attention(heads(lin(l + "attention.query", y)), heads(lin(l + "attention.key", kv)),
                          heads(lin(l + "attention.value", kv)), at::Tensor(),
                          1.0 / std::sqrt(static_cast<double>(hd)));
        x = x + lin(l + "attention.proj", ctx.transpose(1, 2).reshape({b, s, h}));
        at::Tensor m = lin(l + "mlp.dense1", ln(l + "layer_norm_2", x, c_.eps));
        const int64_t inner = m.size(2);
        m = nn::Conv2d(m.transpose(1, 2).reshape({b, inner, ht, wd}),
                       GetWeight(w, l + "mlp.dwconv.dwconv.weight"),
                       GetWeight(w, l + "mlp.dwconv.dwconv.bias"), 1, 1, inner);
        m = Activate(m.flatten(2).transpose(1, 2), c_.act);
        x = x + lin(l + "mlp.dense2", m);
      }
      x = ln(pre_ + "encoder.layer_norms." + std::to_string(i), x, 1e-5);
      x = x.reshape({b, ht, wd, h}).permute({0, 3, 1, 2});  // reshape_last_stage for the last
    }
    return {x, x.flatten(2).mean(2)};
  }

  std::vector<int64_t> LastHiddenShape() const override {
    return {c_.hidden_sizes.back(), side_, side_};
  }
  int64_t PooledWidth() const override { return c_.hidden_sizes.back(); }

 private:
  std::string Layer(size_t i, int64_t j) const {
    return pre_ + "encoder.block." + std::to_string(i) + "." + std::to_string(j) + ".";
  }

  PvtV2Config c_;
  std::string pre_;
  int64_t side_ = 0;
};

StatusOr<json> ScalePvtV2(const json& config) {
  TS_ASSIGN_OR_RETURN(PvtV2Config c, ParsePvtV2(config));
  json t = config;
  // 16 channels per head (the b0-b5 checkpoints' heads 1, 2, 5, 8 give 16, 32, 80, 128), one
  // layer per stage; 32 pixels give 8, 4, 2, 1 per side, where the real sr_ratios (8, 4, 2, 1)
  // would leave one key everywhere: they are divided by 4 (at least 1), so stage 0 still reduces
  // its 8 x 8 map to 4 x 4 keys and the later stages attend over all their tokens.
  std::vector<int64_t> hs, ds, srs;
  for (int64_t h : c.heads) hs.push_back(16 * h);
  for (int64_t d : c.depths) ds.push_back(std::min<int64_t>(d, 1));
  for (int64_t r : c.sr_ratios) srs.push_back(std::max<int64_t>(1, r / 4));
  t["hidden_sizes"] = hs;
  t["depths"] = ds;
  t["sr_ratios"] = srs;
  t["image_size"] = TinyProfile::kImageSize;
  TS_ASSIGN_OR_RETURN(PvtV2Config tiny, ParsePvtV2(t));
  int64_t side = tiny.image_size;
  for (size_t i = 0; i < tiny.hidden_sizes.size(); ++i) {
    side = (side + 2 * (tiny.patch_sizes[i] / 2) - tiny.patch_sizes[i]) / tiny.strides[i] + 1;
    if (side < tiny.sr_ratios[i])
      return ConfigReader(config).Error("sr_ratios", "reduce below one token at 32 x 32");
  }
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

StatusOr<json> ScalePvtV2Backbone(const json& config) {
  TS_ASSIGN_OR_RETURN(PvtV2Config c, ParsePvtV2(config));
  TS_RETURN_IF_ERROR(CheckLastStageBackbone(config, static_cast<int64_t>(c.depths.size())));
  TS_ASSIGN_OR_RETURN(json t, ScalePvtV2(config));
  t.erase("stage_names");
  t.erase("num_labels");
  return t;
}

StatusOr<std::unique_ptr<Model>> BuildPvtV2(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(PvtV2Config c, ParsePvtV2(spec.tiny_config));
  const VisionHeadKind kind = VisionHeadKindOf(spec.arch);
  if (kind == VisionHeadKind::kBackbone) {
    TS_RETURN_IF_ERROR(
        CheckLastStageBackbone(spec.tiny_config, static_cast<int64_t>(c.depths.size())));
  }
  const int64_t labels = c.num_labels;
  auto trunk = std::make_unique<PvtV2Trunk>(
      std::move(c), kind == VisionHeadKind::kClassification ? "pvt_v2." : "");
  auto head = VisionHeadFor(kind, *trunk, labels);
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

std::vector<ArchEntry> PvtV2Archs() {
  // OpenGVLab/pvt_v2_b0.
  const json example = {{"model_type", "pvt_v2"},
                        {"image_size", 224},
                        {"num_channels", 3},
                        {"num_encoder_blocks", 4},
                        {"depths", {2, 2, 2, 2}},
                        {"sr_ratios", {8, 4, 2, 1}},
                        {"hidden_sizes", {32, 64, 160, 256}},
                        {"patch_sizes", {7, 3, 3, 3}},
                        {"strides", {4, 2, 2, 2}},
                        {"num_attention_heads", {1, 2, 5, 8}},
                        {"mlp_ratios", {8, 8, 4, 4}},
                        {"hidden_act", "gelu"},
                        {"qkv_bias", true},
                        {"layer_norm_eps", 1e-6},
                        {"linear_attention", false},
                        {"reshape_last_stage", true},
                        {"drop_path_rate", 0.0},
                        {"initializer_range", 0.02},
                        {"num_labels", 1000}};
  json base = WithArchitecture(example, "PvtV2Model");
  base.erase("num_labels");
  json backbone = WithArchitecture(base, "PvtV2Backbone");
  backbone["out_features"] = {"stage4"};
  return {{{"PvtV2ForImageClassification", "pvt_v2", "image-classification"},
           WithArchitecture(example, "PvtV2ForImageClassification"),
           ScalePvtV2,
           BuildPvtV2},
          {{"PvtV2Model", "pvt_v2", "feature-extraction"}, base, ScalePvtV2, BuildPvtV2},
          {{"PvtV2Backbone", "pvt_v2", "backbone"}, backbone, ScalePvtV2Backbone, BuildPvtV2}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(PvtV2, PvtV2Archs);

}  // namespace ts::zoo::internal
