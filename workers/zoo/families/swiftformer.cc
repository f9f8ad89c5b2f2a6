// swiftformer (modeling_swiftformer.py, configuration_swiftformer.py): SwiftFormerModel
// (last_hidden_state: the last stage's map; no pooler) and SwiftFormerForImageClassification
// (`norm`, a BatchNorm over the last map, its spatial mean, then (head + dist_head) / 2). The
// trunk lives here (no other family uses it): patch_embed (two 3x3 / 2 convs with BatchNorm and
// ReLU), stages of SwiftFormerConvEncoder blocks (depthwise 3x3, BatchNorm, 1x1, GELU, 1x1, times
// layer_scale, plus the input) ending in a SwiftFormerEncoderBlock (the local representation,
// then the efficient additive attention over the tokens: normalised query and key, the query
// weights w_g scaled by dim^-0.5 and softmaxed over their single column, the global query summed
// over the tokens, final(proj(global * key) + query); then the BatchNorm + 1x1-conv MLP; each
// branch times layer_scale_1 / layer_scale_2 when use_layer_scale), and SwiftFormerEmbeddings
// (conv + BatchNorm) between stages that downsample or change width. Every BatchNorm runs in eval
// mode (eps batch_norm_eps).
//
// Refused, naming the field: depths / embed_dims / downsamples of different lengths.
#include <algorithm>
#include <cmath>
#include <set>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_conv.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct SwiftFormerConfig {
  int64_t num_channels = 3, image_size = 224, down_patch = 3, down_stride = 2, down_pad = 1;
  std::vector<int64_t> depths, dims;
  std::vector<bool> downsamples;
  double mlp_ratio = 4, bn_eps = 1e-5;
  bool layer_scale = true;
  VisionActivation act;
  int64_t num_labels = 2;
};

StatusOr<SwiftFormerConfig> ParseSwiftFormer(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  SwiftFormerConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {3, 3, 6, 4}));
  TS_ASSIGN_OR_RETURN(c.dims, IntList(config, "embed_dims", {48, 56, 112, 220}));
  if (c.depths.empty()) return r.Error("depths", "must not be empty");
  TS_RETURN_IF_ERROR(CheckAllPositive("depths", c.depths));
  TS_RETURN_IF_ERROR(CheckAllPositive("embed_dims", c.dims));
  TS_RETURN_IF_ERROR(CheckLen("embed_dims", c.dims, c.depths.size()));
  c.downsamples.assign(c.depths.size(), true);
  if (r.Has("downsamples")) {
    const json& d = config["downsamples"];
    if (!d.is_array() || d.size() != c.depths.size())
      return r.Error("downsamples", "expected " + std::to_string(c.depths.size()) + " booleans");
    for (size_t i = 0; i < d.size(); ++i) {
      if (!d[i].is_boolean()) return r.Error("downsamples", "expected booleans");
      c.downsamples[i] = d[i].get<bool>();
    }
  }
  TS_ASSIGN_OR_RETURN(c.mlp_ratio, r.Double("mlp_ratio", 4));
  if (!(c.mlp_ratio > 0)) return r.Error("mlp_ratio", "must be positive");
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(c.down_patch, PositiveInt(r, "down_patch_size", 3));
  TS_ASSIGN_OR_RETURN(c.down_stride, PositiveInt(r, "down_stride", 2));
  TS_ASSIGN_OR_RETURN(c.down_pad, r.Int("down_pad", 1));
  if (c.down_pad < 0) return r.Error("down_pad", "must not be negative");
  TS_ASSIGN_OR_RETURN(c.layer_scale, r.Bool("use_layer_scale", true));
  TS_ASSIGN_OR_RETURN(c.bn_eps, r.Double("batch_norm_eps", 1e-5));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

// Widths with the last 64 (ratios kept, multiples of 8, at least 16), two blocks per stage (a
// conv encoder and the encoder block), the 64-pixel image (the last map 2 x 2).
StatusOr<json> ScaleSwiftFormer(const json& config) {
  TS_ASSIGN_OR_RETURN(SwiftFormerConfig c, ParseSwiftFormer(config));
  json t = config;
  std::vector<int64_t> dims, depths;
  for (size_t i = 0; i < c.dims.size(); ++i) {
    dims.push_back(std::max<int64_t>(16, ScaleRatio(c.dims[i], c.dims.back(), 64, 8)));
    depths.push_back(std::min<int64_t>(c.depths[i], 2));
  }
  t["embed_dims"] = dims;
  t["depths"] = depths;
  t["image_size"] = 2 * TinyProfile::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  TS_RETURN_IF_ERROR(ParseSwiftFormer(t).status());
  return t;
}

class SwiftFormerTrunk : public VisionTrunk {
 public:
  SwiftFormerTrunk(SwiftFormerConfig c, std::string prefix)
      : VisionTrunk(c.num_channels, c.image_size), c_(std::move(c)), p_(std::move(prefix)) {
    const int64_t d0 = c_.dims[0];
    const std::string pe = p_ + "patch_embed.patch_embedding.";
    Conv(pe + "0.", channels(), d0 / 2, 3);
    AddBn(pe + "1.", d0 / 2);
    Conv(pe + "3.", d0 / 2, d0, 3);
    AddBn(pe + "4.", d0);
    int64_t side = (image_size() - 1) / 2 + 1;
    side = (side - 1) / 2 + 1;
    int64_t net = 0;
    for (size_t s = 0; s < c_.depths.size(); ++s) {
      const int64_t dim = c_.dims[s];
      Stage stage;
      stage.p = p_ + "encoder.network." + std::to_string(net++) + ".";
      stage.dim = dim;
      stage.depth = c_.depths[s];
      for (int64_t j = 0; j < stage.depth; ++j) {
        const std::string b = stage.p + "blocks." + std::to_string(j) + ".";
        if (j + 1 < stage.depth) {
          ConvMixer(b, dim, static_cast<int64_t>(c_.mlp_ratio * static_cast<double>(dim)));
          continue;
        }
        ConvMixer(b + "local_representation.", dim, dim);
        const std::string a = b + "attn.";
        for (const char* m : {"to_query", "to_key"}) Linear(a + m + ".", dim, dim);
        Add(a + "w_g", {dim, 1});
        Linear(a + "proj.", dim, dim);
        Linear(a + "final.", dim, dim);
        const auto hidden = static_cast<int64_t>(static_cast<double>(dim) * c_.mlp_ratio);
        AddBn(b + "linear.norm1.", dim);
        Conv(b + "linear.fc1.", dim, hidden, 1);
        Conv(b + "linear.fc2.", hidden, dim, 1);
        if (c_.layer_scale) {
          scales_.insert(Add(b + "layer_scale_1", {dim, 1, 1}));
          scales_.insert(Add(b + "layer_scale_2", {dim, 1, 1}));
        }
      }
      stages_.push_back(stage);
      if (s + 1 < c_.depths.size() && (c_.downsamples[s] || c_.dims[s] != c_.dims[s + 1])) {
        const std::string e = p_ + "encoder.network." + std::to_string(net++) + ".";
        Conv(e + "proj.", dim, c_.dims[s + 1], c_.down_patch);
        AddBn(e + "norm.", c_.dims[s + 1]);
        stages_.back().embed = e;
        side = (side + 2 * c_.down_pad - c_.down_patch) / c_.down_stride + 1;
      }
    }
    side_ = side;
  }

  // Layer scales U(0.5, 1.5) (transformers: 1, or layer_scale_init_value 1e-5), so that a wrong
  // branch shows. Conv and Linear weights N(0, 0.02), transformers' _init_weights (trunc_normal
  // std 0.02), not the zoo's fan-in std: with that the tiny model's logits start in the tens and
  // the engine's 5 SGD steps at lr 0.05 reach NaN (4 of 4 seeds); at 0.02 they train smoothly.
  // w_g keeps the model's policy (transformers: randn).
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (scales_.count(name)) {
      t.uniform_(0.5, 1.5, gen);
      return true;
    }
    if (t.dim() < 2 || bn_or_gate(name)) return false;
    t.normal_(0.0, 0.02, gen);
    return true;
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    const std::string pe = p_ + "patch_embed.patch_embedding.";
    at::Tensor x = at::relu(Bn(w, pe + "1.", ConvRun(w, pe + "0.", pixel_values, 2, 1)));
    x = at::relu(Bn(w, pe + "4.", ConvRun(w, pe + "3.", x, 2, 1)));
    for (const Stage& s : stages_) {
      for (int64_t j = 0; j < s.depth; ++j) {
        const std::string b = s.p + "blocks." + std::to_string(j) + ".";
        x = j + 1 < s.depth ? Mixer(w, b, x) : EncoderBlock(w, b, x);
      }
      if (!s.embed.empty())
        x = Bn(w, s.embed + "norm.", ConvRun(w, s.embed + "proj.", x, c_.down_stride, c_.down_pad));
    }
    return {x, at::Tensor()};
  }

  std::vector<int64_t> LastHiddenShape() const override { return {c_.dims.back(), side_, side_}; }
  int64_t PooledWidth() const override { return c_.dims.back(); }

 private:
  // Weights the fan-in rule above does not cover: the BatchNorms' and the attention's w_g.
  bool bn_or_gate(const std::string& name) const {
    const bool gate = name.size() >= 3 && name.compare(name.size() - 3, 3, "w_g") == 0;
    return gate || BatchNormWeights().count(name) > 0;
  }

  struct Stage {
    std::string p, embed;
    int64_t dim = 0, depth = 0;
  };

  void Conv(const std::string& p, int64_t in, int64_t out, int64_t k, int64_t groups = 1) {
    Add(p + "weight", {out, in / groups, k, k});
    Add(p + "bias", {out});
  }
  void Linear(const std::string& p, int64_t in, int64_t out) {
    Add(p + "weight", {out, in});
    Add(p + "bias", {out});
  }
  // SwiftFormerConvEncoder / SwiftFormerLocalRepresentation (hidden = dim for the latter).
  void ConvMixer(const std::string& p, int64_t dim, int64_t hidden) {
    Conv(p + "depth_wise_conv.", dim, dim, 3, dim);
    AddBn(p + "norm.", dim);
    Conv(p + "point_wise_conv1.", dim, hidden, 1);
    Conv(p + "point_wise_conv2.", hidden, dim, 1);
    scales_.insert(Add(p + "layer_scale", {dim, 1, 1}));
  }

  at::Tensor ConvRun(const WeightMap& w, const std::string& p, const at::Tensor& x, int64_t stride,
                     int64_t pad, int64_t groups = 1) const {
    return nn::Conv2d(x, GetWeight(w, p + "weight"), GetWeight(w, p + "bias"), stride, pad, groups);
  }
  at::Tensor Bn(const WeightMap& w, const std::string& p, const at::Tensor& x) const {
    return BatchNorm2d(w, p, x, c_.bn_eps);
  }

  at::Tensor Mixer(const WeightMap& w, const std::string& p, const at::Tensor& in) const {
    at::Tensor x = Bn(w, p + "norm.", ConvRun(w, p + "depth_wise_conv.", in, 1, 1, in.size(1)));
    x = nn::Activate(ConvRun(w, p + "point_wise_conv1.", x, 1, 0), Activation::kGeluErf);
    x = ConvRun(w, p + "point_wise_conv2.", x, 1, 0);
    return in + GetWeight(w, p + "layer_scale") * x;
  }

  // F.normalize(x, dim=-1): x / max(||x||, 1e-12).
  static at::Tensor Normalize(const at::Tensor& x) {
    return x / x.norm(2, {-1}, /*keepdim=*/true).clamp_min(1e-12).expand_as(x);
  }

  at::Tensor Attention(const WeightMap& w, const std::string& a, const at::Tensor& x) const {
    auto lin = [&](const std::string& m, const at::Tensor& y) {
      return nn::Linear(y, GetWeight(w, a + m + ".weight"), GetWeight(w, a + m + ".bias"));
    };
    at::Tensor query = Normalize(lin("to_query", x));
    at::Tensor key = Normalize(lin("to_key", x));
    const double scale = 1.0 / std::sqrt(static_cast<double>(x.size(-1)));
    at::Tensor weight = at::softmax(nn::Matmul(query, GetWeight(w, a + "w_g")) * scale, -1);
    at::Tensor global = (weight * query).sum({1});
    global = global.unsqueeze(1).repeat({1, key.size(1), 1});
    return lin("final", lin("proj", global * key) + query);
  }

  at::Tensor EncoderBlock(const WeightMap& w, const std::string& b, const at::Tensor& in) const {
    at::Tensor x = Mixer(w, b + "local_representation.", in);
    const int64_t bs = x.size(0), ch = x.size(1), h = x.size(2), wd = x.size(3);
    at::Tensor attn = Attention(w, b + "attn.", x.permute({0, 2, 3, 1}).reshape({bs, h * wd, ch}));
    attn = attn.reshape({bs, h, wd, ch}).permute({0, 3, 1, 2});
    if (c_.layer_scale) attn = GetWeight(w, b + "layer_scale_1") * attn;
    x = x + attn;
    at::Tensor y = Bn(w, b + "linear.norm1.", x);
    y = Activate(ConvRun(w, b + "linear.fc1.", y, 1, 0), c_.act);
    y = ConvRun(w, b + "linear.fc2.", y, 1, 0);
    if (c_.layer_scale) y = GetWeight(w, b + "layer_scale_2") * y;
    return x + y;
  }

  SwiftFormerConfig c_;
  std::string p_;
  std::vector<Stage> stages_;
  std::set<std::string> scales_;
  int64_t side_ = 1;
};

// SwiftFormerForImageClassification's head: `norm` (BatchNorm over the last map), the spatial
// mean, (head + dist_head) / 2; loss as ImageClassificationHead.
class SwiftFormerHead : public ImageHead {
 public:
  SwiftFormerHead(int64_t width, int64_t num_labels, double eps)
      : classifier_(ImageClassificationHead(
            {.prefix = "head.", .num_labels = num_labels, .width = width, .flatten = false})),
        eps_(eps) {
    for (const char* s : {"weight", "bias", "running_mean", "running_var"})
      Add(std::string("norm.") + s, {width});
    for (const char* h : {"head.", "dist_head."}) {
      Add(std::string(h) + "weight", {num_labels, width});
      Add(std::string(h) + "bias", {num_labels});
    }
  }

  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  // BatchNorm scale 1; head and dist_head N(0, 0.02) as the trunk's (SwiftFormerTrunk).
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (name == "norm.weight") {
      t.fill_(1.0);
      return true;
    }
    if (name != "head.weight" && name != "dist_head.weight") return false;
    t.normal_(0.0, 0.02, gen);
    return true;
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const VisionFeatures& f) const override {
    at::Tensor x = BatchNorm2d(w, "norm.", f.last_hidden_state, eps_).flatten(2).mean(-1);
    at::Tensor cls = nn::Linear(x, GetWeight(w, "head.weight"), GetWeight(w, "head.bias"));
    at::Tensor dist =
        nn::Linear(x, GetWeight(w, "dist_head.weight"), GetWeight(w, "dist_head.bias"));
    return {(cls + dist) / 2};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    return classifier_->Loss(out, labels);
  }
  void AddLabels(at::Generator& gen, int64_t batch_size, TensorMap& labels) const override {
    classifier_->AddLabels(gen, batch_size, labels);
  }

 private:
  std::unique_ptr<ImageHead> classifier_;  // its loss and labels only
  double eps_;
};

decltype(ArchEntry::build) BuildSwiftFormer(bool classifier) {
  return [classifier](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(SwiftFormerConfig c, ParseSwiftFormer(spec.tiny_config));
    auto trunk = std::make_unique<SwiftFormerTrunk>(c, classifier ? "swiftformer." : "");
    std::unique_ptr<ImageHead> h;
    if (classifier) {
      h = std::make_unique<SwiftFormerHead>(c.dims.back(), c.num_labels, c.bn_eps);
    } else {
      h = VisionHeadFor(VisionHeadKind::kFeatures, *trunk, /*num_labels=*/0);
    }
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(h));
  };
}

std::vector<ArchEntry> SwiftFormerArchs() {
  // MBZUAI/swiftformer-xs.
  const json example = {{"model_type", "swiftformer"},
                        {"image_size", 224},
                        {"num_channels", 3},
                        {"depths", {3, 3, 6, 4}},
                        {"embed_dims", {48, 56, 112, 220}},
                        {"mlp_ratio", 4},
                        {"downsamples", {true, true, true, true}},
                        {"hidden_act", "gelu"},
                        {"down_patch_size", 3},
                        {"down_stride", 2},
                        {"down_pad", 1},
                        {"drop_path_rate", 0.0},
                        {"use_layer_scale", true},
                        {"layer_scale_init_value", 1e-5},
                        {"batch_norm_eps", 1e-5},
                        {"num_labels", 1000}};
  json base = example;
  base.erase("num_labels");
  return {{{"SwiftFormerModel", "swiftformer", "image-feature-extraction"},
           WithArchitecture(base, "SwiftFormerModel"),
           ScaleSwiftFormer,
           BuildSwiftFormer(false)},
          {{"SwiftFormerForImageClassification", "swiftformer", "image-classification"},
           WithArchitecture(example, "SwiftFormerForImageClassification"),
           ScaleSwiftFormer,
           BuildSwiftFormer(true)}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(SwiftFormer, SwiftFormerArchs);

}  // namespace ts::zoo::internal
