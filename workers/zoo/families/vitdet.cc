// vitdet (modeling_vitdet.py, configuration_vitdet.py): VitDetModel (last_hidden_state: the
// encoder's map [B, C, H, W], no pooler) and VitDetBackbone (feature_maps: the last stage's map,
// BackboneMixin's default out_features). The trunk lives here (no other family uses it):
// VitDetEmbeddings (the patch conv, the absolute position table without its cls row added on the
// grid), VitDetLayers (LayerNorm, window partition with zero padding to whole windows for the
// layers in window_block_indices, attention with the decomposed relative positions (rel_pos_h /
// rel_pos_w gathered at q - k + size - 1, added per query row and column) when
// use_relative_position_embeddings, unpartition, residual; LayerNorm, MLP, residual) and, for the
// layers in residual_block_indices, VitDetResBottleneckBlock (1x1, 3x3, 1x1 bias-free convs with
// channels-first LayerNorms (eps 1e-6), act after the first two, plus the input).
//
// The tiny config sets pretrain_image_size to its image_size, so that the position table is the
// grid's and transformers' bicubic resize is the identity it is for such configs; a real config
// whose pretrain_image_size differs is run at the tiny scale without the resize (FIDELITY.md).
// Refused, naming the field: hidden_size not divisible by num_attention_heads, window or
// residual block indices outside the layers, a negative window_size.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct VitDetConfig {
  int64_t num_channels = 3, image_size = 224, pretrain_image_size = 224, patch = 16;
  int64_t hidden = 768, layers = 12, heads = 12, window = 0;
  double mlp_ratio = 4, ln_eps = 1e-6;
  bool qkv_bias = true, abs_pos = true, rel_pos = false;
  std::set<int64_t> window_layers, residual_layers;
  Activation act = Activation::kGeluErf;
};

StatusOr<std::set<int64_t>> IndexSet(const json& config, const std::string& field, int64_t layers) {
  TS_ASSIGN_OR_RETURN(std::vector<int64_t> v, IntList(config, field, {}));
  std::set<int64_t> out;
  for (int64_t i : v) {
    if (i < 0 || i >= layers)
      return InvalidArgumentError(field + ": index " + std::to_string(i) + " outside the " +
                                  std::to_string(layers) + " layers");
    out.insert(i);
  }
  return out;
}

StatusOr<VitDetConfig> ParseVitDet(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  VitDetConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.pretrain_image_size, PositiveInt(r, "pretrain_image_size", 224));
  TS_ASSIGN_OR_RETURN(c.patch, PositiveInt(r, "patch_size", 16));
  TS_ASSIGN_OR_RETURN(c.hidden, PositiveInt(r, "hidden_size", 768));
  TS_ASSIGN_OR_RETURN(c.layers, PositiveInt(r, "num_hidden_layers", 12));
  TS_ASSIGN_OR_RETURN(c.heads, PositiveInt(r, "num_attention_heads", 12));
  if (c.hidden % c.heads != 0)
    return r.Error("hidden_size", "must be divisible by num_attention_heads");
  if (c.hidden % 2 != 0) return r.Error("hidden_size", "must be even (the bottleneck is half)");
  TS_ASSIGN_OR_RETURN(c.mlp_ratio, r.Double("mlp_ratio", 4));
  if (!(c.mlp_ratio > 0)) return r.Error("mlp_ratio", "must be positive");
  TS_ASSIGN_OR_RETURN(c.ln_eps, r.Double("layer_norm_eps", 1e-6));
  TS_ASSIGN_OR_RETURN(c.qkv_bias, r.Bool("qkv_bias", true));
  TS_ASSIGN_OR_RETURN(c.abs_pos, r.Bool("use_absolute_position_embeddings", true));
  TS_ASSIGN_OR_RETURN(c.rel_pos, r.Bool("use_relative_position_embeddings", false));
  TS_ASSIGN_OR_RETURN(c.window, r.Int("window_size", 0));
  if (c.window < 0) return r.Error("window_size", "must not be negative");
  TS_ASSIGN_OR_RETURN(c.window_layers, IndexSet(config, "window_block_indices", c.layers));
  TS_ASSIGN_OR_RETURN(c.residual_layers, IndexSet(config, "residual_block_indices", c.layers));
  std::string act = "gelu";
  if (r.Has("hidden_act")) {
    if (!config["hidden_act"].is_string()) return r.Error("hidden_act", "expected a string");
    act = config["hidden_act"].get<std::string>();
  }
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(act, "hidden_act"));
  if (c.image_size / c.patch < 1) return r.Error("patch_size", "larger than image_size");
  return c;
}

// hidden 32 (2 heads), two layers: a windowed one (window 4 on the 6 x 6 grid, so that the
// partition pads) when the config has windowed layers, then one with the residual block when the
// config has any; the 48-pixel image with 8-pixel patches; pretrain_image_size = image_size.
StatusOr<json> ScaleVitDet(const json& config) {
  TS_ASSIGN_OR_RETURN(VitDetConfig c, ParseVitDet(config));
  json t = config;
  t["hidden_size"] = 32;
  t["num_attention_heads"] = std::min<int64_t>(c.heads, 2);
  const int64_t layers = std::min<int64_t>(c.layers, 2);
  t["num_hidden_layers"] = layers;
  t["window_block_indices"] =
      c.window_layers.empty() || c.window == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{0};
  if (c.window > 0) t["window_size"] = 4;
  t["residual_block_indices"] =
      c.residual_layers.empty() ? std::vector<int64_t>{} : std::vector<int64_t>{layers - 1};
  t["image_size"] = 48;
  t["pretrain_image_size"] = 48;
  t["patch_size"] = 8;
  SetTinyRunProfile(t, 1);
  TS_RETURN_IF_ERROR(ParseVitDet(t).status());
  return t;
}

class VitDetTrunk : public VisionTrunk {
 public:
  explicit VitDetTrunk(VitDetConfig c)
      : VisionTrunk(c.num_channels, c.image_size), c_(std::move(c)) {
    grid_ = c_.image_size / c_.patch;
    Add("embeddings.projection.weight", {c_.hidden, c_.num_channels, c_.patch, c_.patch});
    Add("embeddings.projection.bias", {c_.hidden});
    if (c_.abs_pos) {
      const int64_t g = c_.pretrain_image_size / c_.patch;
      Add("embeddings.position_embeddings", {1, g * g + 1, c_.hidden});
    }
    const int64_t d = c_.hidden, hd = d / c_.heads;
    const auto mlp = static_cast<int64_t>(static_cast<double>(d) * c_.mlp_ratio);
    for (int64_t i = 0; i < c_.layers; ++i) {
      const std::string p = "encoder.layer." + std::to_string(i) + ".";
      Ln(p + "norm1.", d);
      Add(p + "attention.qkv.weight", {3 * d, d});
      if (c_.qkv_bias) Add(p + "attention.qkv.bias", {3 * d});
      Add(p + "attention.proj.weight", {d, d});
      Add(p + "attention.proj.bias", {d});
      if (c_.rel_pos) {
        const int64_t size = Windowed(i) ? c_.window : grid_;
        if (!rel_index_.count(size)) rel_index_[size] = RelIndex(size);
        Add(p + "attention.rel_pos_h", {2 * size - 1, hd});
        Add(p + "attention.rel_pos_w", {2 * size - 1, hd});
      }
      Ln(p + "norm2.", d);
      Add(p + "mlp.fc1.weight", {mlp, d});
      Add(p + "mlp.fc1.bias", {mlp});
      Add(p + "mlp.fc2.weight", {d, mlp});
      Add(p + "mlp.fc2.bias", {d});
      if (c_.residual_layers.count(i)) {
        const std::string b = p + "residual.";
        Add(b + "conv1.weight", {d / 2, d, 1, 1});
        Ln(b + "norm1.", d / 2);
        Add(b + "conv2.weight", {d / 2, d / 2, 3, 3});
        Ln(b + "norm2.", d / 2);
        Add(b + "conv3.weight", {d, d / 2, 1, 1});
        Ln(b + "norm3.", d);
      }
    }
  }

  // LayerNorm scales 1 (a channels-first one included), the rest the model's policy.
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& /*gen*/) const override {
    if (!ln_scales_.count(name)) return false;
    t.fill_(1.0);
    return true;
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    at::Tensor x = nn::Conv2d(pixel_values, GetWeight(w, "embeddings.projection.weight"),
                              GetWeight(w, "embeddings.projection.bias"), c_.patch, 0);
    x = x.permute({0, 2, 3, 1});  // [B, H, W, C]
    if (c_.abs_pos) {
      at::Tensor pos = GetWeight(w, "embeddings.position_embeddings").slice(1, 1);
      x = x + pos.reshape({1, grid_, grid_, -1});
    }
    for (int64_t i = 0; i < c_.layers; ++i) x = Layer(w, i, x);
    x = x.permute({0, 3, 1, 2});
    return {x, at::Tensor()};
  }

  std::vector<int64_t> LastHiddenShape() const override { return {c_.hidden, grid_, grid_}; }
  int64_t PooledWidth() const override { return c_.hidden; }

 private:
  bool Windowed(int64_t i) const { return c_.window > 0 && c_.window_layers.count(i) > 0; }

  void Ln(const std::string& p, int64_t c) {
    ln_scales_.insert(Add(p + "weight", {c}));
    Add(p + "bias", {c});
  }

  // get_rel_pos with q_size == k_size == size: the index q - k + size - 1 of rel_pos, built
  // once (like the other index tables, a constant the forward moves to the device).
  static at::Tensor RelIndex(int64_t size) {
    std::vector<int64_t> idx;
    for (int64_t q = 0; q < size; ++q)
      for (int64_t k = 0; k < size; ++k) idx.push_back(q - k + size - 1);
    return at::tensor(idx, at::TensorOptions().dtype(at::kLong));
  }
  at::Tensor RelPos(const at::Tensor& table, int64_t size) const {
    return table.index_select(0, rel_index_.at(size).to(table.device())).view({size, size, -1});
  }

  // VitDetAttention over [N, h, w, C] windows (or the whole map).
  at::Tensor Attention(const WeightMap& w, const std::string& p, const at::Tensor& x) const {
    const int64_t n = x.size(0), h = x.size(1), wd = x.size(2), heads = c_.heads;
    const int64_t hd = c_.hidden / heads, len = h * wd;
    at::Tensor bias = c_.qkv_bias ? GetWeight(w, p + "qkv.bias") : at::Tensor();
    at::Tensor qkv = nn::Linear(x, GetWeight(w, p + "qkv.weight"), bias)
                         .reshape({n, len, 3, heads, hd})
                         .permute({2, 0, 3, 1, 4})
                         .reshape({3, n * heads, len, hd});
    at::Tensor q = qkv[0], k = qkv[1], v = qkv[2];
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    at::Tensor scores = nn::Matmul(q * scale, k.transpose(-2, -1));
    if (c_.rel_pos) {
      at::Tensor rh = RelPos(GetWeight(w, p + "rel_pos_h"), h);   // [h, h, hd]
      at::Tensor rw = RelPos(GetWeight(w, p + "rel_pos_w"), wd);  // [w, w, hd]
      at::Tensor rq = q.reshape({n * heads, h, wd, hd});
      // einsum("bhwc,hkc->bhwk") and einsum("bhwc,wkc->bhwk") as batched matmuls.
      at::Tensor rel_h =
          nn::Matmul(rq.permute({1, 0, 2, 3}).reshape({h, -1, hd}), rh.transpose(1, 2))
              .reshape({h, n * heads, wd, h})
              .permute({1, 0, 2, 3});
      at::Tensor rel_w =
          nn::Matmul(rq.permute({2, 0, 1, 3}).reshape({wd, -1, hd}), rw.transpose(1, 2))
              .reshape({wd, n * heads, h, wd})
              .permute({1, 2, 0, 3});
      scores = (scores.view({n * heads, h, wd, h, wd}) + rel_h.unsqueeze(4) + rel_w.unsqueeze(3))
                   .view({n * heads, len, len});
    }
    at::Tensor out = nn::Matmul(at::softmax(scores, -1), v)
                         .view({n, heads, h, wd, hd})
                         .permute({0, 2, 3, 1, 4})
                         .reshape({n, h, wd, c_.hidden});
    return nn::Linear(out, GetWeight(w, p + "proj.weight"), GetWeight(w, p + "proj.bias"));
  }

  at::Tensor Layer(const WeightMap& w, int64_t i, const at::Tensor& in) const {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    auto ln = [&](const std::string& n, const at::Tensor& t) {
      return nn::LayerNorm(t, GetWeight(w, p + n + ".weight"), GetWeight(w, p + n + ".bias"),
                           c_.ln_eps);
    };
    at::Tensor x = ln("norm1", in);
    const int64_t bs = x.size(0), h = x.size(1), wd = x.size(2), ch = x.size(3);
    if (Windowed(i)) {
      const int64_t ws = c_.window;
      const int64_t ph = (ws - h % ws) % ws, pw = (ws - wd % ws) % ws;
      at::Tensor y = at::constant_pad_nd(x, {0, 0, 0, pw, 0, ph}, 0);
      const int64_t hp = h + ph, wp = wd + pw;
      y = y.view({bs, hp / ws, ws, wp / ws, ws, ch})
              .permute({0, 1, 3, 2, 4, 5})
              .reshape({-1, ws, ws, ch});
      y = Attention(w, p + "attention.", y);
      x = y.view({bs, hp / ws, wp / ws, ws, ws, ch})
              .permute({0, 1, 3, 2, 4, 5})
              .reshape({bs, hp, wp, ch})
              .slice(1, 0, h)
              .slice(2, 0, wd);
    } else {
      x = Attention(w, p + "attention.", x);
    }
    x = in + x;
    at::Tensor m = nn::Linear(ln("norm2", x), GetWeight(w, p + "mlp.fc1.weight"),
                              GetWeight(w, p + "mlp.fc1.bias"));
    m = nn::Activate(m, c_.act);
    x = x + nn::Linear(m, GetWeight(w, p + "mlp.fc2.weight"), GetWeight(w, p + "mlp.fc2.bias"));
    if (!c_.residual_layers.count(i)) return x;
    // VitDetResBottleneckBlock over the channels-first map.
    const std::string b = p + "residual.";
    at::Tensor y = x.permute({0, 3, 1, 2});
    at::Tensor r = y;
    for (int j = 1; j <= 3; ++j) {
      const std::string s = std::to_string(j);
      r = nn::Conv2d(r, GetWeight(w, b + "conv" + s + ".weight"), at::Tensor(), 1, j == 2 ? 1 : 0);
      r = ChannelsFirstLn(w, b + "norm" + s + ".", r);
      if (j < 3) r = nn::Activate(r, c_.act);
    }
    return (y + r).permute({0, 2, 3, 1});
  }

  // VitDetLayerNorm: mean and biased variance over the channels, eps 1e-6.
  static at::Tensor ChannelsFirstLn(const WeightMap& w, const std::string& p, const at::Tensor& x) {
    at::Tensor u = x.mean({1}, /*keepdim=*/true);
    at::Tensor s = (x - u).pow(2).mean({1}, /*keepdim=*/true);
    return GetWeight(w, p + "weight").view({1, -1, 1, 1}) * ((x - u) / at::sqrt(s + 1e-6)) +
           GetWeight(w, p + "bias").view({1, -1, 1, 1});
  }

  VitDetConfig c_;
  int64_t grid_ = 1;
  std::set<std::string> ln_scales_;
  std::map<int64_t, at::Tensor> rel_index_;  // by window / grid size
};

StatusOr<json> ScaleVitDetBackbone(const json& config) {
  TS_ASSIGN_OR_RETURN(VitDetConfig c, ParseVitDet(config));
  TS_RETURN_IF_ERROR(CheckLastStageBackbone(config, c.layers));
  TS_ASSIGN_OR_RETURN(json t, ScaleVitDet(config));
  // out_features / out_indices name the real model's last stage; the tiny model's is its own.
  const int64_t layers = t["num_hidden_layers"].get<int64_t>();
  if (t.contains("out_features")) t["out_features"] = {"stage" + std::to_string(layers)};
  if (t.contains("out_indices")) t["out_indices"] = {layers};
  return t;
}

decltype(ArchEntry::build) BuildVitDet(bool backbone) {
  return [backbone](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(VitDetConfig c, ParseVitDet(spec.tiny_config));
    if (backbone) TS_RETURN_IF_ERROR(CheckLastStageBackbone(spec.tiny_config, c.layers));
    if (c.abs_pos && c.pretrain_image_size / c.patch != c.image_size / c.patch) {
      return InvalidArgumentError(
          "pretrain_image_size: the position table's bicubic resize to another grid is not "
          "built");
    }
    auto trunk = std::make_unique<VitDetTrunk>(std::move(c));
    auto h = VisionHeadFor(backbone ? VisionHeadKind::kBackbone : VisionHeadKind::kFeatures, *trunk,
                           /*num_labels=*/0);
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(h));
  };
}

std::vector<ArchEntry> VitDetArchs() {
  // The ViTDet-B of Mask R-CNN (facebook/vit-mae-base weights): windowed layers with relative
  // positions, residual blocks after every third layer.
  const json example = {{"model_type", "vitdet"},
                        {"hidden_size", 768},
                        {"num_hidden_layers", 12},
                        {"num_attention_heads", 12},
                        {"mlp_ratio", 4},
                        {"hidden_act", "gelu"},
                        {"dropout_prob", 0.0},
                        {"initializer_range", 0.02},
                        {"layer_norm_eps", 1e-6},
                        {"image_size", 224},
                        {"pretrain_image_size", 224},
                        {"patch_size", 16},
                        {"num_channels", 3},
                        {"qkv_bias", true},
                        {"drop_path_rate", 0.0},
                        {"window_block_indices", {0, 1, 3, 4, 6, 7, 9, 10}},
                        {"residual_block_indices", {2, 5, 8, 11}},
                        {"use_absolute_position_embeddings", true},
                        {"use_relative_position_embeddings", true},
                        {"window_size", 14}};
  json backbone = WithArchitecture(example, "VitDetBackbone");
  backbone["out_features"] = {"stage12"};
  return {{{"VitDetModel", "vitdet", "image-feature-extraction"},
           WithArchitecture(example, "VitDetModel"),
           ScaleVitDet,
           BuildVitDet(false)},
          {{"VitDetBackbone", "vitdet", "backbone"},
           std::move(backbone),
           ScaleVitDetBackbone,
           BuildVitDet(true)}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(VitDet, VitDetArchs);

}  // namespace ts::zoo::internal
