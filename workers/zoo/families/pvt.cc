// pvt (modeling_pvt.py): PvtModel (last_hidden_state: the last stage's tokens with its cls token,
// after `encoder.layer_norm`; no pooler) and PvtForImageClassification (`pvt.`; the classifier on
// token 0). Per stage `encoder.patch_embeddings.I`: `projection` (a Conv2d of kernel strides[i]
// and stride patch_sizes[i], as transformers passes them), `layer_norm`, the last stage's
// `cls_token` prepended, then `position_embeddings` added (transformers' bilinear
// interpolate_pos_encoding to the same grid is the identity); layers `encoder.block.I.J.`
// (layer_norm_1; attention.self.query on every token, key / value on the tokens reduced by
// attention.self.sr and attention.self.layer_norm when the stage's sequence_reduction_ratio > 1;
// attention.output.dense; layer_norm_2; mlp.dense1, act, mlp.dense2); every stage but the last
// back to a map. The last stage's reduction ratio must be 1 (transformers reshapes its tokens,
// cls included, to the grid). The trunk lives here: only this family uses it.
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

struct PvtConfig {
  int64_t num_channels = 3, image_size = 224, num_labels = 2;
  std::vector<int64_t> hidden_sizes, depths, heads, sr_ratios, patch_sizes, strides;
  std::vector<double> mlp_ratios;
  double eps = 1e-6;
  bool qkv_bias = true;
  VisionActivation act;

  // Stage i's grid side as transformers sizes its position table: image_size // 2^(i + 1) for
  // i > 0, then // patch_sizes[i].
  int64_t TableSide(size_t i) const {
    const int64_t img = i == 0 ? image_size : image_size >> (i + 1);
    return img / patch_sizes[i];
  }
};

StatusOr<PvtConfig> ParsePvt(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  PvtConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.hidden_sizes, IntList(config, "hidden_sizes", {64, 128, 320, 512}));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {2, 2, 2, 2}));
  TS_ASSIGN_OR_RETURN(c.heads, IntList(config, "num_attention_heads", {1, 2, 5, 8}));
  TS_ASSIGN_OR_RETURN(c.sr_ratios, IntList(config, "sequence_reduction_ratios", {8, 4, 2, 1}));
  TS_ASSIGN_OR_RETURN(c.patch_sizes, IntList(config, "patch_sizes", {4, 2, 2, 2}));
  TS_ASSIGN_OR_RETURN(c.strides, IntList(config, "strides", {4, 2, 2, 2}));
  TS_ASSIGN_OR_RETURN(int64_t blocks, PositiveInt(r, "num_encoder_blocks", 4));
  const std::pair<const char*, std::vector<int64_t>*> lists[] = {
      {"hidden_sizes", &c.hidden_sizes}, {"depths", &c.depths},
      {"num_attention_heads", &c.heads}, {"sequence_reduction_ratios", &c.sr_ratios},
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
  if (c.sr_ratios.back() != 1)
    return r.Error("sequence_reduction_ratios",
                   "the last stage's must be 1 (it holds the cls token)");
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
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  // The conv's grid must be the position table's (transformers' reshape needs it).
  int64_t side = c.image_size;
  for (size_t i = 0; i < c.hidden_sizes.size(); ++i) {
    side = (side - c.strides[i]) / c.patch_sizes[i] + 1;
    if (side < 1 || side != c.TableSide(i)) {
      return r.Error("patch_sizes", "stage " + std::to_string(i) + "'s grid " +
                                        std::to_string(side) + " is not its position table's " +
                                        std::to_string(c.TableSide(i)));
    }
    if (c.sr_ratios[i] > side) {
      return r.Error("sequence_reduction_ratios", "exceeds stage " + std::to_string(i) + "'s grid");
    }
  }
  return c;
}

class PvtTrunk : public VisionTrunk {
 public:
  PvtTrunk(PvtConfig c, std::string prefix)
      : VisionTrunk(c.num_channels, c.image_size), c_(std::move(c)), pre_(std::move(prefix)) {
    const size_t last = c_.hidden_sizes.size() - 1;
    for (size_t i = 0; i < c_.hidden_sizes.size(); ++i) {
      const int64_t h = c_.hidden_sizes[i], g = c_.TableSide(i);
      const int64_t in = i == 0 ? c_.num_channels : c_.hidden_sizes[i - 1];
      const std::string e = pre_ + "encoder.patch_embeddings." + std::to_string(i) + ".";
      Add(e + "position_embeddings", {1, g * g + (i == last ? 1 : 0), h});
      if (i == last) Add(e + "cls_token", {1, 1, h});
      Add(e + "projection.weight", {h, in, c_.strides[i], c_.strides[i]});
      Add(e + "projection.bias", {h});
      Add(e + "layer_norm.weight", {h});
      Add(e + "layer_norm.bias", {h});
      const auto inner = static_cast<int64_t>(static_cast<double>(h) * c_.mlp_ratios[i]);
      for (int64_t j = 0; j < c_.depths[i]; ++j) {
        const std::string l = Layer(i, j);
        Add(l + "layer_norm_1.weight", {h});
        Add(l + "layer_norm_1.bias", {h});
        for (const char* m : {"query", "key", "value"}) {
          Add(l + "attention.self." + m + ".weight", {h, h});
          if (c_.qkv_bias) Add(l + "attention.self." + m + ".bias", {h});
        }
        const int64_t sr = c_.sr_ratios[i];
        if (sr > 1) {
          Add(l + "attention.self.sr.weight", {h, h, sr, sr});
          Add(l + "attention.self.sr.bias", {h});
          Add(l + "attention.self.layer_norm.weight", {h});
          Add(l + "attention.self.layer_norm.bias", {h});
        }
        Add(l + "attention.output.dense.weight", {h, h});
        Add(l + "attention.output.dense.bias", {h});
        Add(l + "layer_norm_2.weight", {h});
        Add(l + "layer_norm_2.bias", {h});
        Add(l + "mlp.dense1.weight", {inner, h});
        Add(l + "mlp.dense1.bias", {inner});
        Add(l + "mlp.dense2.weight", {h, inner});
        Add(l + "mlp.dense2.bias", {h});
      }
    }
    Add(pre_ + "encoder.layer_norm.weight", {c_.hidden_sizes.back()});
    Add(pre_ + "encoder.layer_norm.bias", {c_.hidden_sizes.back()});
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    auto lin = [&](const std::string& p, const at::Tensor& x) {
      const std::string b = p + ".bias";
      return nn::Linear(x, GetWeight(w, p + ".weight"), w.count(b) ? w.at(b) : at::Tensor());
    };
    auto ln = [&](const std::string& p, const at::Tensor& x) {
      return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), c_.eps);
    };
    const size_t last = c_.hidden_sizes.size() - 1;
    const int64_t b = pixel_values.size(0);
    at::Tensor x = pixel_values;
    for (size_t i = 0; i < c_.hidden_sizes.size(); ++i) {
      const int64_t h = c_.hidden_sizes[i], nh = c_.heads[i], hd = h / nh, sr = c_.sr_ratios[i];
      const std::string e = pre_ + "encoder.patch_embeddings." + std::to_string(i) + ".";
      x = nn::Conv2d(x, GetWeight(w, e + "projection.weight"), GetWeight(w, e + "projection.bias"),
                     c_.patch_sizes[i]);
      const int64_t ht = x.size(2), wd = x.size(3);
      x = ln(e + "layer_norm", x.flatten(2).transpose(1, 2));
      if (i == last) x = at::cat({GetWeight(w, e + "cls_token").expand({b, 1, h}), x}, 1);
      x = x + GetWeight(w, e + "position_embeddings");
      const int64_t s = x.size(1);
      for (int64_t j = 0; j < c_.depths[i]; ++j) {
        const std::string l = Layer(i, j);
        at::Tensor y = ln(l + "layer_norm_1", x);
        at::Tensor kv = y;
        if (sr > 1) {
          kv = nn::Conv2d(y.transpose(1, 2).reshape({b, h, ht, wd}),
                          GetWeight(w, l + "attention.self.sr.weight"),
                          GetWeight(w, l + "attention.self.sr.bias"), sr);
          kv = ln(l + "attention.self.layer_norm", kv.flatten(2).transpose(1, 2));
        }
        auto heads = [&](const at::Tensor& t) {
          return t.view({b, t.size(1), nh, hd}).transpose(1, 2);
        };
        at::Tensor ctx = nn::Attention(heads(lin(l + "attention.self.query", y)),
                                       heads(lin(l + "attention.self.key", kv)),
                                       heads(lin(l + "attention.self.value", kv)), at::Tensor(),
                                       1.0 / std::sqrt(static_cast<double>(hd)));
        x = x + lin(l + "attention.output.dense", ctx.transpose(1, 2).reshape({b, s, h}));
        at::Tensor m = Activate(lin(l + "mlp.dense1", ln(l + "layer_norm_2", x)), c_.act);
        x = x + lin(l + "mlp.dense2", m);
      }
      if (i != last) x = x.reshape({b, ht, wd, h}).permute({0, 3, 1, 2});
    }
    x = ln(pre_ + "encoder.layer_norm", x);
    return {x, x.select(1, 0)};
  }

  std::vector<int64_t> LastHiddenShape() const override {
    const int64_t g = c_.TableSide(c_.hidden_sizes.size() - 1);
    return {1 + g * g, c_.hidden_sizes.back()};
  }
  int64_t PooledWidth() const override { return c_.hidden_sizes.back(); }

 private:
  std::string Layer(size_t i, int64_t j) const {
    return pre_ + "encoder.block." + std::to_string(i) + "." + std::to_string(j) + ".";
  }

  PvtConfig c_;
  std::string pre_;
};

StatusOr<json> ScalePvt(const json& config) {
  TS_ASSIGN_OR_RETURN(PvtConfig c, ParsePvt(config));
  json t = config;
  // 16 channels per head (pvt-tiny's heads 1, 2, 5, 8 give 16, 32, 80, 128), one layer per
  // stage; at 32 pixels the grids are 8, 4, 2, 1: sequence_reduction_ratios divided by 4 (at
  // least 1) so that stage 0 still reduces 8 x 8 queries' keys to 4 x 4.
  std::vector<int64_t> hs, ds, srs;
  for (int64_t h : c.heads) hs.push_back(16 * h);
  for (int64_t d : c.depths) ds.push_back(std::min<int64_t>(d, 1));
  for (int64_t r : c.sr_ratios) srs.push_back(std::max<int64_t>(1, r / 4));
  t["hidden_sizes"] = hs;
  t["depths"] = ds;
  t["sequence_reduction_ratios"] = srs;
  t["image_size"] = TinyProfile::kImageSize;
  TS_RETURN_IF_ERROR(ParsePvt(t).status());
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

StatusOr<std::unique_ptr<Model>> BuildPvt(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(PvtConfig c, ParsePvt(spec.tiny_config));
  const VisionHeadKind kind = VisionHeadKindOf(spec.arch);
  const int64_t labels = c.num_labels;
  auto trunk = std::make_unique<PvtTrunk>(std::move(c),
                                          kind == VisionHeadKind::kClassification ? "pvt." : "");
  auto head = VisionHeadFor(kind, *trunk, labels);
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

std::vector<ArchEntry> PvtArchs() {
  // Xrenya/pvt-tiny-224 (PvtConfig's defaults).
  const json example = {{"model_type", "pvt"},
                        {"image_size", 224},
                        {"num_channels", 3},
                        {"num_encoder_blocks", 4},
                        {"depths", {2, 2, 2, 2}},
                        {"sequence_reduction_ratios", {8, 4, 2, 1}},
                        {"hidden_sizes", {64, 128, 320, 512}},
                        {"patch_sizes", {4, 2, 2, 2}},
                        {"strides", {4, 2, 2, 2}},
                        {"num_attention_heads", {1, 2, 5, 8}},
                        {"mlp_ratios", {8, 8, 4, 4}},
                        {"hidden_act", "gelu"},
                        {"qkv_bias", true},
                        {"layer_norm_eps", 1e-6},
                        {"drop_path_rate", 0.0},
                        {"initializer_range", 0.02},
                        {"num_labels", 1000}};
  json base = WithArchitecture(example, "PvtModel");
  base.erase("num_labels");
  return {{{"PvtForImageClassification", "pvt", "image-classification"},
           WithArchitecture(example, "PvtForImageClassification"),
           ScalePvt,
           BuildPvt},
          {{"PvtModel", "pvt", "image-feature-extraction"}, base, ScalePvt, BuildPvt}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Pvt, PvtArchs);

}  // namespace ts::zoo::internal
