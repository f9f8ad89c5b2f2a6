// PoolFormer (modeling_poolformer.py): PoolFormerModel (last_hidden_state, the last stage's map;
// no pooler) and PoolFormerForImageClassification (`poolformer.`; the classifier on the spatial
// mean of `norm`, a one-group GroupNorm, over that map). Per stage: a patch-embedding conv
// (`encoder.patch_embeddings.I.projection`, patch_sizes / strides / padding), then layers
// `encoder.block.I.J`: x + layer_scale_1 * (avg_pool(before_norm(x)) - before_norm(x)) with
// AvgPool2d(pool_size, stride 1, pool_size // 2, count_include_pad false), then x +
// layer_scale_2 * output.conv2(act(output.conv1(after_norm(x)))) (1x1 convs; without
// use_layer_scale the scales are absent). The trunk lives here: only this family uses it.
#include <algorithm>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct PoolFormerConfig {
  int64_t num_channels = 3, pool_size = 3, image_size = 224, num_labels = 2;
  std::vector<int64_t> hidden_sizes, depths, patch_sizes, strides, padding;
  double mlp_ratio = 4.0;
  bool layer_scale = true;
  VisionActivation act;
};

StatusOr<PoolFormerConfig> ParsePoolFormer(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  PoolFormerConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.pool_size, PositiveInt(r, "pool_size", 3));
  if (c.pool_size % 2 == 0) return r.Error("pool_size", "must be odd (padding pool_size // 2)");
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.hidden_sizes, IntList(config, "hidden_sizes", {64, 128, 320, 512}));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {2, 2, 6, 2}));
  TS_ASSIGN_OR_RETURN(c.patch_sizes, IntList(config, "patch_sizes", {7, 3, 3, 3}));
  TS_ASSIGN_OR_RETURN(c.strides, IntList(config, "strides", {4, 2, 2, 2}));
  TS_ASSIGN_OR_RETURN(c.padding, IntList(config, "padding", {2, 1, 1, 1}));
  TS_RETURN_IF_ERROR(CheckAllPositive("hidden_sizes", c.hidden_sizes));
  TS_RETURN_IF_ERROR(CheckAllPositive("depths", c.depths));
  TS_RETURN_IF_ERROR(CheckAllPositive("patch_sizes", c.patch_sizes));
  TS_RETURN_IF_ERROR(CheckAllPositive("strides", c.strides));
  if (c.hidden_sizes.empty()) return InvalidArgumentError("hidden_sizes: must not be empty");
  TS_ASSIGN_OR_RETURN(int64_t blocks, PositiveInt(r, "num_encoder_blocks",
                                                  static_cast<int64_t>(c.hidden_sizes.size())));
  for (const auto* f : {&c.hidden_sizes, &c.depths, &c.patch_sizes, &c.strides, &c.padding}) {
    const char* name = f == &c.hidden_sizes  ? "hidden_sizes"
                       : f == &c.depths      ? "depths"
                       : f == &c.patch_sizes ? "patch_sizes"
                       : f == &c.strides     ? "strides"
                                             : "padding";
    TS_RETURN_IF_ERROR(CheckLen(name, *f, static_cast<size_t>(blocks)));
  }
  for (int64_t p : c.padding) {
    if (p < 0) return InvalidArgumentError("padding: must be >= 0");
  }
  TS_ASSIGN_OR_RETURN(c.mlp_ratio, r.Double("mlp_ratio", 4.0));
  if (c.mlp_ratio <= 0) return r.Error("mlp_ratio", "must be > 0");
  TS_ASSIGN_OR_RETURN(c.layer_scale, r.Bool("use_layer_scale", true));
  TS_RETURN_IF_ERROR(r.Double("layer_scale_init_value", 1e-5).status());
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

// nn.GroupNorm(1, C) over [B, C, H, W], written out as audio.h's ChannelGroupNorm (mean and
// centred variance over C, H, W per image).
at::Tensor OneGroupNorm(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  const at::Tensor centred = x - x.mean({1, 2, 3}, /*keepdim=*/true);
  const at::Tensor var = centred.pow(2).mean({1, 2, 3}, /*keepdim=*/true);
  return centred / (var + 1e-5).sqrt() * GetWeight(w, p + ".weight").view({1, -1, 1, 1}) +
         GetWeight(w, p + ".bias").view({1, -1, 1, 1});
}

class PoolFormerTrunk : public VisionTrunk {
 public:
  // `classifier`: the model under `poolformer.` and the classifier's `norm`; pooled is the
  // spatial mean of norm(last map) (without it: of the last map).
  PoolFormerTrunk(PoolFormerConfig c, bool classifier)
      : VisionTrunk(c.num_channels, c.image_size), c_(std::move(c)), classifier_(classifier) {
    pre_ = classifier_ ? "poolformer." : "";
    side_ = c_.image_size;
    for (size_t i = 0; i < c_.hidden_sizes.size(); ++i) {
      const int64_t in = i == 0 ? c_.num_channels : c_.hidden_sizes[i - 1];
      const int64_t h = c_.hidden_sizes[i], k = c_.patch_sizes[i];
      const std::string e = pre_ + "encoder.patch_embeddings." + std::to_string(i) + ".projection.";
      Add(e + "weight", {h, in, k, k});
      Add(e + "bias", {h});
      side_ = (side_ + 2 * c_.padding[i] - k) / c_.strides[i] + 1;
      const auto inter = static_cast<int64_t>(static_cast<double>(h) * c_.mlp_ratio);
      for (int64_t j = 0; j < c_.depths[i]; ++j) {
        const std::string lp =
            pre_ + "encoder.block." + std::to_string(i) + "." + std::to_string(j) + ".";
        Add(lp + "output.conv1.weight", {inter, h, 1, 1});
        Add(lp + "output.conv1.bias", {inter});
        Add(lp + "output.conv2.weight", {h, inter, 1, 1});
        Add(lp + "output.conv2.bias", {h});
        for (const char* n : {"before_norm", "after_norm"}) {
          Add(lp + n + ".weight", {h});
          Add(lp + n + ".bias", {h});
        }
        if (c_.layer_scale) {
          Add(lp + "layer_scale_1", {h});
          Add(lp + "layer_scale_2", {h});
        }
      }
    }
    if (classifier_) {
      Add("norm.weight", {c_.hidden_sizes.back()});
      Add("norm.bias", {c_.hidden_sizes.back()});
    }
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    at::Tensor x = pixel_values;
    for (size_t i = 0; i < c_.hidden_sizes.size(); ++i) {
      const std::string e = pre_ + "encoder.patch_embeddings." + std::to_string(i) + ".projection.";
      x = nn::Conv2d(x, GetWeight(w, e + "weight"), GetWeight(w, e + "bias"), c_.strides[i],
                     c_.padding[i]);
      for (int64_t j = 0; j < c_.depths[i]; ++j) {
        const std::string lp =
            pre_ + "encoder.block." + std::to_string(i) + "." + std::to_string(j) + ".";
        auto scaled = [&](const char* s, const at::Tensor& t) {
          return c_.layer_scale ? GetWeight(w, lp + s).view({1, -1, 1, 1}) * t : t;
        };
        at::Tensor y = OneGroupNorm(w, lp + "before_norm", x);
        const int64_t k = c_.pool_size;
        y = at::avg_pool2d(y, {k, k}, {1, 1}, {k / 2, k / 2}, /*ceil_mode=*/false,
                           /*count_include_pad=*/false) -
            y;
        x = x + scaled("layer_scale_1", y);
        y = OneGroupNorm(w, lp + "after_norm", x);
        y = Activate(nn::Conv2d(y, GetWeight(w, lp + "output.conv1.weight"),
                                GetWeight(w, lp + "output.conv1.bias"), 1, 0),
                     c_.act);
        y = nn::Conv2d(y, GetWeight(w, lp + "output.conv2.weight"),
                       GetWeight(w, lp + "output.conv2.bias"), 1, 0);
        x = x + scaled("layer_scale_2", y);
      }
    }
    const at::Tensor pooled = (classifier_ ? OneGroupNorm(w, "norm", x) : x).mean({-2, -1});
    return {x, pooled};
  }

  std::vector<int64_t> LastHiddenShape() const override {
    return {c_.hidden_sizes.back(), side_, side_};
  }
  int64_t PooledWidth() const override { return c_.hidden_sizes.back(); }
  // layer_scale_* start at layer_scale_init_value (1e-5) in transformers, which would hide the
  // blocks: U(0.5, 1.5) as ConvNeXt's; the GroupNorm scales start at 1 as transformers'.
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (name.find(".layer_scale_") != std::string::npos) {
      t.uniform_(0.5, 1.5, gen);
      return true;
    }
    return false;
  }

 private:
  PoolFormerConfig c_;
  bool classifier_;
  std::string pre_;
  int64_t side_ = 0;
};

StatusOr<json> ScalePoolFormer(const json& config) {
  TS_ASSIGN_OR_RETURN(PoolFormerConfig c, ParsePoolFormer(config));
  json t = config;
  // Last stage 128 wide (widths multiples of 8), one layer per stage, the strides and padding
  // kept: 32 pixels give 8, 4, 2, 1 per side over sail/poolformer's four stages.
  const int64_t last = c.hidden_sizes.back();
  std::vector<int64_t> hs, ds;
  for (int64_t h : c.hidden_sizes) {
    hs.push_back(std::max<int64_t>(8, ScaleRatio(h, last, 128, 8) / 8 * 8));
  }
  for (int64_t d : c.depths) ds.push_back(std::min<int64_t>(d, 1));
  t["hidden_sizes"] = hs;
  t["depths"] = ds;
  t["image_size"] = TinyProfile::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  TS_ASSIGN_OR_RETURN(PoolFormerConfig tiny, ParsePoolFormer(t));
  int64_t side = tiny.image_size;
  for (size_t i = 0; i < tiny.hidden_sizes.size(); ++i) {
    side = (side + 2 * tiny.padding[i] - tiny.patch_sizes[i]) / tiny.strides[i] + 1;
    if (side < 1) return ConfigReader(config).Error("strides", "leave no pixels at 32 x 32");
  }
  return t;
}

StatusOr<std::unique_ptr<Model>> BuildPoolFormer(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(PoolFormerConfig c, ParsePoolFormer(spec.tiny_config));
  const VisionHeadKind kind = VisionHeadKindOf(spec.arch);
  const int64_t labels = c.num_labels;
  auto trunk =
      std::make_unique<PoolFormerTrunk>(std::move(c), kind == VisionHeadKind::kClassification);
  auto head = VisionHeadFor(kind, *trunk, labels);
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

std::vector<ArchEntry> PoolFormerArchs() {
  // sail/poolformer_s12.
  const json example = {{"model_type", "poolformer"},
                        {"num_channels", 3},
                        {"patch_size", 16},
                        {"stride", 16},
                        {"pool_size", 3},
                        {"mlp_ratio", 4.0},
                        {"depths", {2, 2, 6, 2}},
                        {"hidden_sizes", {64, 128, 320, 512}},
                        {"patch_sizes", {7, 3, 3, 3}},
                        {"strides", {4, 2, 2, 2}},
                        {"padding", {2, 1, 1, 1}},
                        {"num_encoder_blocks", 4},
                        {"drop_path_rate", 0.0},
                        {"hidden_act", "gelu"},
                        {"use_layer_scale", true},
                        {"layer_scale_init_value", 1e-5},
                        {"initializer_range", 0.02},
                        {"num_labels", 1000}};
  json base = WithArchitecture(example, "PoolFormerModel");
  base.erase("num_labels");
  return {{{"PoolFormerForImageClassification", "poolformer", "image-classification"},
           WithArchitecture(example, "PoolFormerForImageClassification"),
           ScalePoolFormer,
           BuildPoolFormer},
          {{"PoolFormerModel", "poolformer", "image-feature-extraction"},
           base,
           ScalePoolFormer,
           BuildPoolFormer}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(PoolFormer, PoolFormerArchs);

}  // namespace ts::zoo::internal
