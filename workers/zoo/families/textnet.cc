// textnet (modeling_textnet.py, configuration_textnet.py): TextNetModel (feature-extraction, the
// only task transformers' table gives it; last_hidden_state: the
// last stage's map; pooler_output: its AdaptiveAvgPool2d((2, 2)), [B, C, 2, 2]),
// TextNetForImageClassification (`fc` over the flattened AdaptiveAvgPool2d((1, 1)) of the last
// map; TextNetModel's 2 x 2 pooler output is computed by transformers and read by nothing, so it is
// not computed here) and TextNetBackbone (feature_maps: the last stage's map, the only selection
// the zoo serves). The trunk lives here (no other family uses it): the stem (conv without bias,
// BatchNorm, stem_act_func), then per stage TextNetRepConvLayers: the main kh x kw conv, a kh x 1
// conv when kw != 1 and a 1 x kw conv when kh != 1 (each without bias, with its BatchNorm), plus an
// identity BatchNorm when the layer keeps width and stride, summed, then ReLU. Every BatchNorm
// runs in eval mode (eps batch_norm_eps); a 1 x 3 or 3 x 1 conv's rectangular padding is a zero
// pad before the conv.
//
// Refused, naming the field: conv_layer_kernel_sizes / conv_layer_strides / hidden_sizes that do
// not describe the same stages, kernel sizes that are not [kh, kw] pairs of odd sizes.
#include <algorithm>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_conv.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct TextNetLayer {
  int64_t kh = 3, kw = 3, stride = 1;
};

struct TextNetConfig {
  int64_t num_channels = 3, stem_kernel = 3, stem_stride = 2, stem_out = 64, image_size = 640;
  std::vector<std::vector<TextNetLayer>> stages;
  std::vector<int64_t> hidden_sizes;
  bool stem_act = true;
  VisionActivation act;
  double bn_eps = 1e-5, initializer_range = 0.02;
  int64_t num_labels = 2;
};

StatusOr<std::vector<std::vector<TextNetLayer>>> TextNetStages(const json& config) {
  json kernels = {{{3, 3}, {3, 3}, {3, 3}},
                  {{3, 3}, {1, 3}, {3, 3}, {3, 1}},
                  {{3, 3}, {3, 3}, {3, 1}, {1, 3}},
                  {{3, 3}, {3, 1}, {1, 3}, {3, 3}}};
  json strides = {{1, 2, 1}, {2, 1, 1, 1}, {2, 1, 1, 1}, {2, 1, 1, 1}};
  if (config.contains("conv_layer_kernel_sizes") && !config["conv_layer_kernel_sizes"].is_null())
    kernels = config["conv_layer_kernel_sizes"];
  if (config.contains("conv_layer_strides") && !config["conv_layer_strides"].is_null())
    strides = config["conv_layer_strides"];
  const std::string kf = "conv_layer_kernel_sizes", sf = "conv_layer_strides";
  if (!kernels.is_array() || !strides.is_array() || kernels.size() != strides.size() ||
      kernels.empty())
    return InvalidArgumentError(kf + ": expected one list per stage, as " + sf);
  std::vector<std::vector<TextNetLayer>> out;
  for (size_t s = 0; s < kernels.size(); ++s) {
    const json& ks = kernels[s];
    const json& ss = strides[s];
    if (!ks.is_array() || !ss.is_array() || ks.size() != ss.size() || ks.empty())
      return InvalidArgumentError(kf + ": stage " + std::to_string(s) + " does not match " + sf);
    std::vector<TextNetLayer> stage;
    for (size_t l = 0; l < ks.size(); ++l) {
      const json& k = ks[l];
      if (!k.is_array() || k.size() != 2 || !k[0].is_number_integer() ||
          !k[1].is_number_integer() || k[0].get<int64_t>() % 2 == 0 ||
          k[1].get<int64_t>() % 2 == 0 || k[0].get<int64_t>() < 1 || k[1].get<int64_t>() < 1)
        return InvalidArgumentError(kf + ": expected [kh, kw] pairs of odd sizes");
      if (!ss[l].is_number_integer() || ss[l].get<int64_t>() < 1)
        return InvalidArgumentError(sf + ": expected positive integers");
      stage.push_back({k[0].get<int64_t>(), k[1].get<int64_t>(), ss[l].get<int64_t>()});
    }
    out.push_back(std::move(stage));
  }
  return out;
}

StatusOr<TextNetConfig> ParseTextNet(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  TextNetConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "stem_num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.stem_kernel, PositiveInt(r, "stem_kernel_size", 3));
  TS_ASSIGN_OR_RETURN(c.stem_stride, PositiveInt(r, "stem_stride", 2));
  TS_ASSIGN_OR_RETURN(c.stem_out, PositiveInt(r, "stem_out_channels", 64));
  if (r.Has("image_size")) {
    const json& im = config["image_size"];
    if (im.is_number_integer()) {
      c.image_size = im.get<int64_t>();
    } else if (im.is_array() && im.size() == 2 && im[0] == im[1] && im[0].is_number_integer()) {
      c.image_size = im[0].get<int64_t>();
    } else {
      return r.Error("image_size", "expected an integer or a square [h, w]");
    }
  }
  TS_ASSIGN_OR_RETURN(c.stages, TextNetStages(config));
  TS_ASSIGN_OR_RETURN(c.hidden_sizes, IntList(config, "hidden_sizes", {64, 64, 128, 256, 512}));
  TS_RETURN_IF_ERROR(CheckAllPositive("hidden_sizes", c.hidden_sizes));
  TS_RETURN_IF_ERROR(CheckLen("hidden_sizes", c.hidden_sizes, c.stages.size() + 1));
  if (c.hidden_sizes[0] != c.stem_out)
    return r.Error("hidden_sizes", "the first entry must be stem_out_channels");
  c.stem_act = !(config.contains("stem_act_func") && config["stem_act_func"].is_null());
  if (c.stem_act) {
    TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "stem_act_func", "relu"));
  }
  TS_ASSIGN_OR_RETURN(c.bn_eps, r.Double("batch_norm_eps", 1e-5));
  TS_ASSIGN_OR_RETURN(c.initializer_range, r.Double("initializer_range", 0.02));
  if (!(c.initializer_range > 0)) return r.Error("initializer_range", "must be positive");
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

// Widths / 8 (at least 8, the stem's kept equal to the first), two layers per stage (the first
// and the last of each, keeping their kernels and strides), the 64-pixel image.
StatusOr<json> ScaleTextNet(const json& config) {
  TS_ASSIGN_OR_RETURN(TextNetConfig c, ParseTextNet(config));
  json t = config;
  std::vector<int64_t> hidden;
  for (int64_t h : c.hidden_sizes) hidden.push_back(std::max<int64_t>(8, h / 8));
  json kernels = json::array(), strides = json::array();
  for (const auto& stage : c.stages) {
    json ks = json::array(), ss = json::array();
    for (size_t l : {size_t{0}, stage.size() - 1}) {
      if (l == 0 && stage.size() == 1) {
        ks.push_back({stage[0].kh, stage[0].kw});
        ss.push_back(stage[0].stride);
        break;
      }
      ks.push_back({stage[l].kh, stage[l].kw});
      ss.push_back(stage[l].stride);
    }
    kernels.push_back(ks);
    strides.push_back(ss);
  }
  t["hidden_sizes"] = hidden;
  t["stem_out_channels"] = hidden[0];
  t["conv_layer_kernel_sizes"] = kernels;
  t["conv_layer_strides"] = strides;
  t["image_size"] = 2 * TinyProfile::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  TS_RETURN_IF_ERROR(ParseTextNet(t).status());
  return t;
}

class TextNetTrunk : public VisionTrunk {
 public:
  // `pool`: the pooled features' side (2: TextNetModel's pooler, 1: the classifier's avg_pool).
  TextNetTrunk(TextNetConfig c, std::string prefix, int64_t pool)
      : VisionTrunk(c.num_channels, c.image_size),
        c_(std::move(c)),
        p_(std::move(prefix)),
        pool_(pool) {
    Add(p_ + "stem.conv.weight", {c_.stem_out, channels(), c_.stem_kernel, c_.stem_kernel});
    AddBn(p_ + "stem.batch_norm.", c_.stem_out);
    side_ = (image_size() + 2 * (c_.stem_kernel / 2) - c_.stem_kernel) / c_.stem_stride + 1;
    for (size_t s = 0; s < c_.stages.size(); ++s) {
      for (size_t l = 0; l < c_.stages[s].size(); ++l) {
        const TextNetLayer& t = c_.stages[s][l];
        const int64_t in = l == 0 ? c_.hidden_sizes[s] : c_.hidden_sizes[s + 1];
        const int64_t out = c_.hidden_sizes[s + 1];
        const std::string p =
            p_ + "encoder.stages." + std::to_string(s) + ".stage." + std::to_string(l) + ".";
        Add(p + "main_conv.weight", {out, in, t.kh, t.kw});
        AddBn(p + "main_batch_norm.", out);
        if (t.kw != 1) {
          Add(p + "vertical_conv.weight", {out, in, t.kh, 1});
          AddBn(p + "vertical_batch_norm.", out);
        }
        if (t.kh != 1) {
          Add(p + "horizontal_conv.weight", {out, in, 1, t.kw});
          AddBn(p + "horizontal_batch_norm.", out);
        }
        if (in == out && t.stride == 1) AddBn(p + "rbr_identity.", in);
        side_ = (side_ - 1) / t.stride + 1;  // odd kernels, (k - 1) / 2 padding
      }
    }
  }

  // Conv weights N(0, initializer_range), transformers' _init_weights, not the zoo's fan-in std:
  // with that, the three summed branches per layer grow the tiny backbone's map (mean |x| near 7)
  // until the engine's 5 SGD steps at lr 0.05 reach NaN; at the transformers std they train
  // smoothly (4 of 4 seeds, backbone and classifier).
  bool InitWeight(const std::string& /*name*/, at::Tensor& t, at::Generator& gen) const override {
    if (t.dim() != 4) return false;
    t.normal_(0.0, c_.initializer_range, gen);
    return true;
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    const int64_t k = c_.stem_kernel;
    at::Tensor x = nn::Conv2d(pixel_values, GetWeight(w, p_ + "stem.conv.weight"), at::Tensor(),
                              c_.stem_stride, k / 2);
    x = BatchNorm2d(w, p_ + "stem.batch_norm.", x, c_.bn_eps);
    if (c_.stem_act) x = Activate(x, c_.act);
    for (size_t s = 0; s < c_.stages.size(); ++s) {
      for (size_t l = 0; l < c_.stages[s].size(); ++l) {
        const std::string p =
            p_ + "encoder.stages." + std::to_string(s) + ".stage." + std::to_string(l) + ".";
        x = RepConv(w, p, c_.stages[s][l], x);
      }
    }
    return {x, at::adaptive_avg_pool2d(x, {pool_, pool_})};
  }

  std::vector<int64_t> LastHiddenShape() const override {
    return {c_.hidden_sizes.back(), side_, side_};
  }
  int64_t PooledWidth() const override { return c_.hidden_sizes.back(); }

 private:
  // A conv (kh x kw, stride, (kh - 1) / 2 x (kw - 1) / 2 padding, no bias) and its BatchNorm. A
  // rectangular padding is a zero pad before the conv (nn::Conv2d pads squares): the same values.
  at::Tensor ConvBn(const WeightMap& w, const std::string& conv, const std::string& bn,
                    const at::Tensor& x, int64_t stride) const {
    const at::Tensor& k = GetWeight(w, conv + ".weight");
    const int64_t ph = (k.size(2) - 1) / 2, pw = (k.size(3) - 1) / 2;
    at::Tensor y = ph == pw ? nn::Conv2d(x, k, at::Tensor(), stride, ph)
                            : nn::Conv2d(at::constant_pad_nd(x, {pw, pw, ph, ph}, 0), k,
                                         at::Tensor(), stride, 0);
    return BatchNorm2d(w, bn + ".", y, c_.bn_eps);
  }

  at::Tensor RepConv(const WeightMap& w, const std::string& p, const TextNetLayer& t,
                     const at::Tensor& x) const {
    at::Tensor y = ConvBn(w, p + "main_conv", p + "main_batch_norm", x, t.stride);
    if (t.kw != 1) y = y + ConvBn(w, p + "vertical_conv", p + "vertical_batch_norm", x, t.stride);
    if (t.kh != 1)
      y = y + ConvBn(w, p + "horizontal_conv", p + "horizontal_batch_norm", x, t.stride);
    if (w.count(p + "rbr_identity.weight"))
      y = y + BatchNorm2d(w, p + "rbr_identity.", x, c_.bn_eps);
    return at::relu(y);
  }

  TextNetConfig c_;
  std::string p_;
  int64_t pool_;
  int64_t side_ = 1;
};

StatusOr<PooledVisionTrunk> MakeTextNetTrunk(const json& tiny, const std::string& prefix) {
  TS_ASSIGN_OR_RETURN(TextNetConfig c, ParseTextNet(tiny));
  const int64_t labels = c.num_labels;
  return PooledVisionTrunk{
      std::make_unique<TextNetTrunk>(std::move(c), prefix, prefix.empty() ? 2 : 1), labels};
}

StatusOr<json> ScaleTextNetBackbone(const json& config) {
  TS_ASSIGN_OR_RETURN(TextNetConfig c, ParseTextNet(config));
  TS_RETURN_IF_ERROR(CheckLastStageBackbone(config, static_cast<int64_t>(c.stages.size())));
  TS_ASSIGN_OR_RETURN(json t, ScaleTextNet(config));
  for (const char* f : {"num_labels", "id2label", "label2id"}) t.erase(f);
  return t;
}

StatusOr<std::unique_ptr<Model>> BuildTextNetBackbone(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(TextNetConfig c, ParseTextNet(spec.tiny_config));
  TS_RETURN_IF_ERROR(
      CheckLastStageBackbone(spec.tiny_config, static_cast<int64_t>(c.stages.size())));
  auto trunk = std::make_unique<TextNetTrunk>(std::move(c), "textnet.", 2);
  auto head = BackboneHead({.prefix_tokens = -1, .map_shape = trunk->LastHiddenShape()});
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

std::vector<ArchEntry> TextNetArchs() {
  // czczup/textnet-base.
  const json example = {{"model_type", "textnet"},  {"stem_kernel_size", 3},
                        {"stem_stride", 2},         {"stem_num_channels", 3},
                        {"stem_out_channels", 64},  {"stem_act_func", "relu"},
                        {"image_size", {640, 640}}, {"hidden_sizes", {64, 64, 128, 256, 512}},
                        {"batch_norm_eps", 1e-5},   {"initializer_range", 0.02},
                        {"num_labels", 2}};
  std::vector<ArchEntry> out = PooledVisionArchs({"TextNet", "textnet", "textnet.", "fc."}, example,
                                                 ScaleTextNet, MakeTextNetTrunk);
  // transformers' table has TextNetModel under feature-extraction only (no image mapping).
  for (ArchEntry& e : out) {
    if (e.info.arch == "TextNetModel") e.info.task = "feature-extraction";
  }
  json backbone = WithArchitecture(example, "TextNetBackbone");
  backbone.erase("num_labels");
  backbone["out_features"] = {"stage4"};
  out.push_back({{"TextNetBackbone", "textnet", "backbone"},
                 std::move(backbone),
                 ScaleTextNetBackbone,
                 BuildTextNetBackbone});
  return out;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(TextNet, TextNetArchs);

}  // namespace ts::zoo::internal
