// hgnet_v2 (modeling_hgnet_v2.py, configuration_hgnet_v2.py): HGNetV2Backbone (feature_maps: the
// last stage's map, BackboneMixin's default out_features) and HGNetV2ForImageClassification
// (`fc` over the map's 1 x 1 average). Both keep `embedder` and `encoder` at the top level (no
// base-model prefix). The trunk lives here (no other family uses it): HGNetV2Embeddings (stem1;
// a (0, 1, 0, 1) zero pad; stem2a and stem2b, 2 x 2 convs, the second after another pad; a 2 x 2
// stride-1 ceil-mode max pool of the padded stem1 map; their concatenation through stem3 and
// stem4), stages of an optional depthwise 3 x 3 / 2 downsample (conv + BatchNorm, no act) and
// HGNetV2BasicLayers (stage_numb_of_layers conv layers, or light layers (1 x 1 conv + BatchNorm,
// then a depthwise conv + BatchNorm + ReLU), every layer's output concatenated with the block
// input, the aggregation squeeze (1 x 1 to out / 2) and excitation (1 x 1 to out), the block
// input added from the second block on). HGNetV2ConvLayer: conv (no bias, (k - 1) / 2 padding),
// eval BatchNorm (eps 1e-5), the activation (hidden_act in the stem, ReLU elsewhere), then the
// learnable affine block (scale * x + bias) when use_learnable_affine_block and the layer has
// an activation.
//
// Refused, naming the field: stage lists of different lengths, a stage's input width that is
// not the previous stage's output (or stem_channels[2] for the first), an odd stem width,
// for the classifier hidden_sizes[-1] other than the last stage's width (its fc reads it), for the
// backbone depths whose length is not the number of stages (its stage names) and out_features /
// out_indices other than the last stage.
#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_conv.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct HgnetConfig {
  int64_t num_channels = 3, image_size = 224;
  std::vector<int64_t> stem, in, mid, out, blocks, kernel, layers, hidden, depths;
  std::vector<bool> downsample, light;
  VisionActivation act;
  bool lab = false;
  double init_range = 0.02;
  int64_t num_labels = 2;
};

StatusOr<std::vector<bool>> BoolList(const json& config, const std::string& field,
                                     std::vector<bool> def) {
  if (!config.contains(field) || config[field].is_null()) return def;
  const json& v = config[field];
  if (!v.is_array()) return InvalidArgumentError(field + ": expected a list of booleans");
  std::vector<bool> out;
  for (const json& b : v) {
    if (!b.is_boolean()) return InvalidArgumentError(field + ": expected a list of booleans");
    out.push_back(b.get<bool>());
  }
  return out;
}

StatusOr<HgnetConfig> ParseHgnet(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  HgnetConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.stem, IntList(config, "stem_channels", {3, 32, 48}));
  TS_RETURN_IF_ERROR(CheckLen("stem_channels", c.stem, 3));
  TS_RETURN_IF_ERROR(CheckAllPositive("stem_channels", c.stem));
  if (c.stem[0] != c.num_channels)
    return r.Error("stem_channels", "stem_channels[0] must be num_channels");
  if (c.stem[1] % 2 != 0) return r.Error("stem_channels", "stem_channels[1] must be even");
  TS_ASSIGN_OR_RETURN(c.in, IntList(config, "stage_in_channels", {48, 128, 512, 1024}));
  TS_ASSIGN_OR_RETURN(c.mid, IntList(config, "stage_mid_channels", {48, 96, 192, 384}));
  TS_ASSIGN_OR_RETURN(c.out, IntList(config, "stage_out_channels", {128, 512, 1024, 2048}));
  TS_ASSIGN_OR_RETURN(c.blocks, IntList(config, "stage_num_blocks", {1, 1, 3, 1}));
  TS_ASSIGN_OR_RETURN(c.kernel, IntList(config, "stage_kernel_size", {3, 3, 5, 5}));
  TS_ASSIGN_OR_RETURN(c.layers, IntList(config, "stage_numb_of_layers", {6, 6, 6, 6}));
  TS_ASSIGN_OR_RETURN(c.downsample,
                      BoolList(config, "stage_downsample", {false, true, true, true}));
  TS_ASSIGN_OR_RETURN(c.light, BoolList(config, "stage_light_block", {false, false, true, true}));
  const size_t n = c.in.size();
  if (n == 0) return r.Error("stage_in_channels", "must not be empty");
  for (const auto& [f, v] : std::vector<std::pair<const char*, const std::vector<int64_t>*>>{
           {"stage_in_channels", &c.in},
           {"stage_mid_channels", &c.mid},
           {"stage_out_channels", &c.out},
           {"stage_num_blocks", &c.blocks},
           {"stage_kernel_size", &c.kernel},
           {"stage_numb_of_layers", &c.layers}}) {
    TS_RETURN_IF_ERROR(CheckLen(f, *v, n));
    TS_RETURN_IF_ERROR(CheckAllPositive(f, *v));
  }
  if (c.downsample.size() != n) return r.Error("stage_downsample", "one entry per stage");
  if (c.light.size() != n) return r.Error("stage_light_block", "one entry per stage");
  for (size_t s = 0; s < n; ++s) {
    const int64_t want = s == 0 ? c.stem[2] : c.out[s - 1];
    if (c.in[s] != want)
      return r.Error("stage_in_channels",
                     "stage " + std::to_string(s) + " takes " + std::to_string(want) + " channels");
    if (c.out[s] % 2 != 0) return r.Error("stage_out_channels", "must be even");
  }
  TS_ASSIGN_OR_RETURN(c.hidden, IntList(config, "hidden_sizes", {256, 512, 1024, 2048}));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {3, 4, 6, 3}));
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "relu"));
  TS_ASSIGN_OR_RETURN(c.lab, r.Bool("use_learnable_affine_block", false));
  TS_ASSIGN_OR_RETURN(c.init_range, r.Double("initializer_range", 0.02));
  if (!(c.init_range > 0)) return r.Error("initializer_range", "must be positive");
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

// Widths with the last 64 (ratios kept, multiples of 8), at most 2 blocks of 2 layers per stage,
// the 64-pixel image (the stem's map 16 x 16).
StatusOr<json> ScaleHgnet(const json& config) {
  TS_ASSIGN_OR_RETURN(HgnetConfig c, ParseHgnet(config));
  const int64_t last = c.out.back();
  auto width = [&](int64_t v) {
    return (std::max<int64_t>(8, ScaleRatio(v, last, 64, 8)) + 7) / 8 * 8;
  };
  auto scale = [&](const std::vector<int64_t>& v) {
    std::vector<int64_t> o;
    for (int64_t x : v) o.push_back(width(x));
    return o;
  };
  json t = config;
  t["stem_channels"] = {c.stem[0], width(c.stem[1]), width(c.stem[2])};
  t["stage_in_channels"] = scale(c.in);
  t["stage_mid_channels"] = scale(c.mid);
  t["stage_out_channels"] = scale(c.out);
  t["hidden_sizes"] = scale(c.hidden);
  if (t.contains("embedding_size") && t["embedding_size"].is_number_integer())
    t["embedding_size"] = width(t["embedding_size"].get<int64_t>());
  std::vector<int64_t> blocks, layers;
  for (size_t s = 0; s < c.in.size(); ++s) {
    blocks.push_back(std::min<int64_t>(c.blocks[s], 2));
    layers.push_back(std::min<int64_t>(c.layers[s], 2));
  }
  t["stage_num_blocks"] = blocks;
  t["stage_numb_of_layers"] = layers;
  t["image_size"] = 2 * TinyProfile::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  TS_RETURN_IF_ERROR(ParseHgnet(t).status());
  return t;
}

class HgnetTrunk : public VisionTrunk {
 public:
  explicit HgnetTrunk(HgnetConfig c) : VisionTrunk(c.num_channels, c.image_size), c_(std::move(c)) {
    const int64_t s1 = c_.stem[1];
    Conv("embedder.stem1.", c_.stem[0], s1, 3, 1, true);
    Conv("embedder.stem2a.", s1, s1 / 2, 2, 1, true);
    Conv("embedder.stem2b.", s1 / 2, s1, 2, 1, true);
    Conv("embedder.stem3.", 2 * s1, s1, 3, 1, true);
    Conv("embedder.stem4.", s1, c_.stem[2], 1, 1, true);
    int64_t side = (image_size() - 1) / 2 + 1;
    side = (side - 1) / 2 + 1;
    for (size_t s = 0; s < c_.in.size(); ++s) {
      const std::string sp = "encoder.stages." + std::to_string(s) + ".";
      if (c_.downsample[s]) {
        Conv(sp + "downsample.", c_.in[s], c_.in[s], 3, c_.in[s], false);
        side = (side - 1) / 2 + 1;
      }
      for (int64_t b = 0; b < c_.blocks[s]; ++b) {
        const std::string bp = sp + "blocks." + std::to_string(b) + ".";
        const int64_t in = b == 0 ? c_.in[s] : c_.out[s];
        for (int64_t l = 0; l < c_.layers[s]; ++l) {
          const std::string lp = bp + "layers." + std::to_string(l) + ".";
          const int64_t lin = l == 0 ? in : c_.mid[s];
          if (c_.light[s]) {
            Conv(lp + "conv1.", lin, c_.mid[s], 1, 1, false);
            Conv(lp + "conv2.", c_.mid[s], c_.mid[s], c_.kernel[s], c_.mid[s], true);
          } else {
            Conv(lp, lin, c_.mid[s], c_.kernel[s], 1, true);
          }
        }
        Conv(bp + "aggregation.0.", in + c_.layers[s] * c_.mid[s], c_.out[s] / 2, 1, 1, true);
        Conv(bp + "aggregation.1.", c_.out[s] / 2, c_.out[s], 1, 1, true);
      }
    }
    side_ = side;
  }

  // transformers' _init_weights: conv weights N(0, initializer_range) (the zoo's fan-in std is
  // not HGNetV2's, and the concatenated aggregation grows the map with it). The learnable affine
  // blocks' scale U(0.5, 1.5) and bias N(0, 0.1) instead of 1 and 0, so that a missed one shows.
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (lab_scales_.count(name)) {
      t.uniform_(0.5, 1.5, gen);
      return true;
    }
    if (lab_biases_.count(name)) {
      t.normal_(0.0, 0.1, gen);
      return true;
    }
    if (!convs_.count(name)) return false;
    t.normal_(0.0, c_.init_range, gen);
    return true;
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    at::Tensor e = Run(w, "embedder.stem1.", pixel_values, 3, 2, 1, c_.act);
    e = at::constant_pad_nd(e, {0, 1, 0, 1}, 0);
    at::Tensor a = Run(w, "embedder.stem2a.", e, 2, 1, 1, c_.act);
    a = Run(w, "embedder.stem2b.", at::constant_pad_nd(a, {0, 1, 0, 1}, 0), 2, 1, 1, c_.act);
    at::Tensor pooled = at::max_pool2d(e, {2, 2}, {1, 1}, {0, 0}, {1, 1}, /*ceil_mode=*/true);
    at::Tensor x = Run(w, "embedder.stem3.", at::cat({pooled, a}, 1), 3, 2, 1, c_.act);
    x = Run(w, "embedder.stem4.", x, 1, 1, 1, c_.act);
    const VisionActivation relu{.relu6 = false, .act = Activation::kRelu};
    for (size_t s = 0; s < c_.in.size(); ++s) {
      const std::string sp = "encoder.stages." + std::to_string(s) + ".";
      if (c_.downsample[s]) x = Run(w, sp + "downsample.", x, 3, 2, c_.in[s], std::nullopt);
      for (int64_t b = 0; b < c_.blocks[s]; ++b) {
        const std::string bp = sp + "blocks." + std::to_string(b) + ".";
        std::vector<at::Tensor> outs = {x};
        at::Tensor y = x;
        for (int64_t l = 0; l < c_.layers[s]; ++l) {
          const std::string lp = bp + "layers." + std::to_string(l) + ".";
          if (c_.light[s]) {
            y = Run(w, lp + "conv1.", y, 1, 1, 1, std::nullopt);
            y = Run(w, lp + "conv2.", y, c_.kernel[s], 1, c_.mid[s], relu);
          } else {
            y = Run(w, lp, y, c_.kernel[s], 1, 1, relu);
          }
          outs.push_back(y);
        }
        y = Run(w, bp + "aggregation.0.", at::cat(outs, 1), 1, 1, 1, relu);
        y = Run(w, bp + "aggregation.1.", y, 1, 1, 1, relu);
        x = b == 0 ? y : y + x;
      }
    }
    return {x, x.mean({2, 3}, /*keepdim=*/true)};
  }

  std::vector<int64_t> LastHiddenShape() const override { return {c_.out.back(), side_, side_}; }
  int64_t PooledWidth() const override { return c_.out.back(); }

 private:
  // HGNetV2ConvLayer under `p`: convolution.weight, normalization.*, lab.scale / lab.bias when
  // the layer has an activation and the config uses learnable affine blocks.
  void Conv(const std::string& p, int64_t in, int64_t out, int64_t k, int64_t groups, bool act) {
    convs_.insert(Add(p + "convolution.weight", {out, in / groups, k, k}));
    AddBn(p + "normalization.", out);
    if (act && c_.lab) {
      lab_scales_.insert(Add(p + "lab.scale", {1}));
      lab_biases_.insert(Add(p + "lab.bias", {1}));
    }
  }

  at::Tensor Run(const WeightMap& w, const std::string& p, const at::Tensor& x, int64_t k,
                 int64_t stride, int64_t groups, std::optional<VisionActivation> act) const {
    at::Tensor y = nn::Conv2d(x, GetWeight(w, p + "convolution.weight"), at::Tensor(), stride,
                              (k - 1) / 2, groups);
    y = BatchNorm2d(w, p + "normalization.", y, 1e-5);
    if (!act) return y;
    y = Activate(y, *act);
    if (c_.lab) y = GetWeight(w, p + "lab.scale") * y + GetWeight(w, p + "lab.bias");
    return y;
  }

  HgnetConfig c_;
  std::set<std::string> convs_, lab_scales_, lab_biases_;
  int64_t side_ = 1;
};

// What only one class reads: the classifier's fc takes hidden_sizes[-1] features; the
// backbone's stage names come from depths.
Status CheckClass(const json& config, const HgnetConfig& c, bool backbone) {
  ConfigReader r(config);
  if (backbone) {
    if (c.depths.size() != c.in.size())
      return r.Error("depths", "one entry per stage (the backbone's stage names)");
    return CheckLastStageBackbone(config, static_cast<int64_t>(c.depths.size()));
  }
  if (c.hidden.empty() || c.hidden.back() != c.out.back())
    return r.Error("hidden_sizes", "hidden_sizes[-1] must be stage_out_channels[-1]");
  return OkStatus();
}

StatusOr<json> ScaleHgnetClassifier(const json& config) {
  TS_ASSIGN_OR_RETURN(HgnetConfig c, ParseHgnet(config));
  TS_RETURN_IF_ERROR(CheckClass(config, c, false));
  return ScaleHgnet(config);
}

StatusOr<json> ScaleHgnetBackbone(const json& config) {
  TS_ASSIGN_OR_RETURN(HgnetConfig c, ParseHgnet(config));
  TS_RETURN_IF_ERROR(CheckClass(config, c, true));
  TS_ASSIGN_OR_RETURN(json t, ScaleHgnet(config));
  for (const char* f : {"num_labels", "id2label", "label2id"}) t.erase(f);
  return t;
}

decltype(ArchEntry::build) BuildHgnet(bool backbone) {
  return [backbone](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(HgnetConfig c, ParseHgnet(spec.tiny_config));
    TS_RETURN_IF_ERROR(CheckClass(spec.tiny_config, c, backbone));
    const int64_t labels = c.num_labels;
    auto trunk = std::make_unique<HgnetTrunk>(std::move(c));
    std::unique_ptr<ImageHead> h;
    if (backbone) {
      h = BackboneHead({.prefix_tokens = -1, .map_shape = trunk->LastHiddenShape()});
    } else {
      h = ImageClassificationHead(
          {.prefix = "fc.", .num_labels = labels, .width = trunk->PooledWidth(), .flatten = true});
    }
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(h));
  };
}

std::vector<ArchEntry> HgnetArchs() {
  // HGNetV2Config's defaults (HGNetV2-B4, the backbone of D-FINE-L / RT-DETRv2).
  const json example = {{"model_type", "hgnet_v2"},
                        {"num_channels", 3},
                        {"embedding_size", 64},
                        {"depths", {3, 4, 6, 3}},
                        {"hidden_sizes", {256, 512, 1024, 2048}},
                        {"hidden_act", "relu"},
                        {"stem_channels", {3, 32, 48}},
                        {"stage_in_channels", {48, 128, 512, 1024}},
                        {"stage_mid_channels", {48, 96, 192, 384}},
                        {"stage_out_channels", {128, 512, 1024, 2048}},
                        {"stage_num_blocks", {1, 1, 3, 1}},
                        {"stage_downsample", {false, true, true, true}},
                        {"stage_light_block", {false, false, true, true}},
                        {"stage_kernel_size", {3, 3, 5, 5}},
                        {"stage_numb_of_layers", {6, 6, 6, 6}},
                        {"use_learnable_affine_block", false},
                        {"initializer_range", 0.02},
                        {"num_labels", 1000}};
  json backbone = WithArchitecture(example, "HGNetV2Backbone");
  backbone.erase("num_labels");
  backbone["out_features"] = {"stage4"};
  return {{{"HGNetV2Backbone", "hgnet_v2", "backbone"},
           std::move(backbone),
           ScaleHgnetBackbone,
           BuildHgnet(true)},
          {{"HGNetV2ForImageClassification", "hgnet_v2", "image-classification"},
           WithArchitecture(example, "HGNetV2ForImageClassification"),
           ScaleHgnetClassifier,
           BuildHgnet(false)}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(HGNetV2, HgnetArchs);

}  // namespace ts::zoo::internal
