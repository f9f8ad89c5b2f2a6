// Zoo: further vision families (README.md): DeiT, ResNet, ConvNeXt, MobileNetV2, EfficientNet,
// Swin. Convolutions with groups (depthwise) go through a local wrapper that follows the nn.h
// emulation contract; BatchNorm uses eval-mode semantics (running stats are weights).
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

using P = TinyProfile;
using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;
using json = nlohmann::json;

// ---- convolutions (nn:: does the bf16 emulation).

at::Tensor Conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t stride,
                int64_t padding, int64_t groups = 1) {
  return nn::Conv2d(x, w, b, stride, padding, groups);
}

// ---- config helpers.

StatusOr<std::vector<int64_t>> IntList(const json& config, const std::string& field,
                                       std::vector<int64_t> def) {
  auto it = config.find(field);
  if (it == config.end() || it->is_null()) return def;
  if (!it->is_array()) {
    return InvalidArgumentError(field + ": expected array of integers, got " +
                                JsonTypeName(*it));
  }
  std::vector<int64_t> out;
  for (const auto& v : *it) {
    if (!v.is_number_integer()) {
      return InvalidArgumentError(field + ": expected array of integers, got an element of type " +
                                  std::string(JsonTypeName(v)));
    }
    out.push_back(v.get<int64_t>());
  }
  return out;
}

Status CheckLen(const std::string& field, const std::vector<int64_t>& v, size_t n) {
  if (v.size() != n) {
    return InvalidArgumentError(field + ": expected " + std::to_string(n) + " entries, got " +
                                std::to_string(v.size()));
  }
  return OkStatus();
}

Status CheckAllPositive(const std::string& field, const std::vector<int64_t>& v) {
  for (int64_t x : v) {
    if (x <= 0) return InvalidArgumentError(field + ": must be positive, got " + std::to_string(x));
  }
  return OkStatus();
}

StatusOr<int64_t> PositiveInt(const ConfigReader& r, const std::string& field, int64_t def) {
  TS_ASSIGN_OR_RETURN(int64_t v, r.Int(field, def));
  if (v <= 0) return r.Error(field, "must be positive, got " + std::to_string(v));
  return v;
}

// hidden_act with relu6 (MobileNetV2) on top of ParseActivation's names.
struct Act {
  bool relu6 = false;
  Activation act = Activation::kGeluErf;
};
StatusOr<Act> ReadAct(const ConfigReader& r, const std::string& field, const std::string& def) {
  TS_ASSIGN_OR_RETURN(std::string name, r.String(field, def));
  Act a;
  if (name == "relu6") {
    a.relu6 = true;
    return a;
  }
  TS_ASSIGN_OR_RETURN(a.act, ParseActivation(name, r.Name(field)));
  return a;
}
at::Tensor Apply(const at::Tensor& x, const Act& a) {
  return a.relu6 ? at::clamp(x, 0.0, 6.0) : nn::Activate(x, a.act);
}

// ---- shared model base.

enum class Head { kBase, kClassifier };

class VisionModel : public Model {
 public:
  VisionModel(ModelSpec spec, Head head, int64_t channels, int64_t image, int64_t labels)
      : Model(std::move(spec)), head_(head), channels_(channels), image_(image), labels_(labels) {}

  Shapes WeightShapes() const override { return shapes_; }
  std::vector<std::string> OutputNames() const override {
    if (head_ == Head::kBase) return {"last_hidden_state", "pooler_output"};
    return {"logits"};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    if (head_ == Head::kBase) {
      // No HF loss: MSE of both outputs onto zero-mean random targets of their shape.
      return (out[0] - GetInput(batch.labels, "target").to(out[0].scalar_type()).view(out[0].sizes()))
                 .pow(2)
                 .mean() +
             out[1].pow(2).mean();
    }
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    if (labels_ == 1) return at::mse_loss(out[0].squeeze(-1), labels.to(out[0].scalar_type()));
    return CrossEntropy(out[0], labels);
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto fopts = at::TensorOptions().dtype(at::kFloat);
    Batch batch;
    batch.inputs["pixel_values"] = at::randn({batch_size, channels_, image_, image_}, gen, fopts);
    if (head_ == Head::kBase) {
      std::vector<int64_t> shape = BaseOutputShape();
      shape.insert(shape.begin(), batch_size);
      batch.labels["target"] = at::randn(shape, gen, fopts);
    } else {
      batch.labels["labels"] =
          labels_ == 1 ? at::randn({batch_size}, gen, fopts)
                       : at::randint(0, labels_, {batch_size}, gen,
                                     at::TensorOptions().dtype(at::kLong));
    }
    return batch;
  }

 protected:
  // Shape of last_hidden_state without the batch dimension.
  virtual std::vector<int64_t> BaseOutputShape() const = 0;

  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    auto ends = [&](const std::string& s) {
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    if (ends("running_var")) {
      t.uniform_(0.5, 1.5, gen);
    } else if (ends("running_mean")) {
      t.normal_(0.0, 0.1, gen);
    } else if (ends("layer_scale_parameter")) {
      t.uniform_(0.5, 1.5, gen);
    } else if (bn_weights_.count(name)) {
      t.fill_(1.0);
    } else {
      Model::InitWeight(name, t, gen);
    }
  }

  std::string Add(const std::string& name, std::vector<int64_t> shape) {
    shapes_.emplace_back(name, std::move(shape));
    return name;
  }
  // BatchNorm parameters and running stats under `p` ("...normalization.").
  void AddBn(const std::string& p, int64_t c) {
    bn_weights_.insert(Add(p + "weight", {c}));
    Add(p + "bias", {c});
    Add(p + "running_mean", {c});
    Add(p + "running_var", {c});
  }
  // Eval-mode BatchNorm over NCHW.
  static at::Tensor Bn(const WeightMap& w, const std::string& p, const at::Tensor& x, double eps) {
    auto v = [&](const char* n) { return GetWeight(w, p + n).view({1, -1, 1, 1}); };
    return (x - v("running_mean")) / at::sqrt(v("running_var") + eps) * v("weight") + v("bias");
  }
  // LayerNorm over the channels of NCHW.
  static at::Tensor LnChannels(const WeightMap& w, const std::string& p, const at::Tensor& x,
                               double eps) {
    return nn::LayerNorm(x.permute({0, 2, 3, 1}), GetWeight(w, p + "weight"),
                         GetWeight(w, p + "bias"), eps)
        .permute({0, 3, 1, 2});
  }
  std::vector<at::Tensor> Finish(const at::Tensor& last, const at::Tensor& pooled,
                                 const WeightMap& w, const std::string& cls) const {
    if (head_ == Head::kBase) return {last, pooled};
    return {nn::Linear(pooled.flatten(1), GetWeight(w, cls + "weight"), GetWeight(w, cls + "bias"))};
  }

  Head head_;
  int64_t channels_, image_, labels_;
  Shapes shapes_;
  std::set<std::string> bn_weights_;
};

// ================================================================ DeiT

struct DeitLayer {
  std::string ln1, ln1b, q, qb, k, kb, v, vb, ao, aob, ln2, ln2b, inter, interb, out, outb;
};

enum class DeitHead { kBase, kClassifier, kWithTeacher };

class DeitModel : public VisionModel {
 public:
  DeitModel(ModelSpec spec, VitConfig c, DeitHead head)
      : VisionModel(std::move(spec), head == DeitHead::kBase ? Head::kBase : Head::kClassifier,
                    c.num_channels, c.image_size, c.num_labels),
        c_(std::move(c)),
        dhead_(head) {
    const int64_t h = c_.hidden_size, im = c_.intermediate_size, p = c_.patch_size;
    const int64_t grid = c_.image_size / p;
    tokens_ = grid * grid + 2;
    const std::string pre = head == DeitHead::kBase ? "" : "deit.";
    cls_ = Add(pre + "embeddings.cls_token", {1, 1, h});
    dist_ = Add(pre + "embeddings.distillation_token", {1, 1, h});
    pos_ = Add(pre + "embeddings.position_embeddings", {1, tokens_, h});
    patch_w_ = Add(pre + "embeddings.patch_embeddings.projection.weight", {h, c_.num_channels, p, p});
    patch_b_ = Add(pre + "embeddings.patch_embeddings.projection.bias", {h});
    for (int64_t i = 0; i < c_.num_hidden_layers; ++i) {
      const std::string lp = pre + "encoder.layer." + std::to_string(i) + ".";
      DeitLayer l;
      l.ln1 = Add(lp + "layernorm_before.weight", {h});
      l.ln1b = Add(lp + "layernorm_before.bias", {h});
      l.q = Add(lp + "attention.attention.query.weight", {h, h});
      if (c_.qkv_bias) l.qb = Add(lp + "attention.attention.query.bias", {h});
      l.k = Add(lp + "attention.attention.key.weight", {h, h});
      if (c_.qkv_bias) l.kb = Add(lp + "attention.attention.key.bias", {h});
      l.v = Add(lp + "attention.attention.value.weight", {h, h});
      if (c_.qkv_bias) l.vb = Add(lp + "attention.attention.value.bias", {h});
      l.ao = Add(lp + "attention.output.dense.weight", {h, h});
      l.aob = Add(lp + "attention.output.dense.bias", {h});
      l.ln2 = Add(lp + "layernorm_after.weight", {h});
      l.ln2b = Add(lp + "layernorm_after.bias", {h});
      l.inter = Add(lp + "intermediate.dense.weight", {im, h});
      l.interb = Add(lp + "intermediate.dense.bias", {im});
      l.out = Add(lp + "output.dense.weight", {h, im});
      l.outb = Add(lp + "output.dense.bias", {h});
      layers_.push_back(std::move(l));
    }
    ln_ = Add(pre + "layernorm.weight", {h});
    lnb_ = Add(pre + "layernorm.bias", {h});
    if (head == DeitHead::kBase) {
      Add("pooler.dense.weight", {h, h});
      Add("pooler.dense.bias", {h});
    } else if (head == DeitHead::kClassifier) {
      Add("classifier.weight", {c_.num_labels, h});
      Add("classifier.bias", {c_.num_labels});
    } else {
      Add("cls_classifier.weight", {c_.num_labels, h});
      Add("cls_classifier.bias", {c_.num_labels});
      Add("distillation_classifier.weight", {c_.num_labels, h});
      Add("distillation_classifier.bias", {c_.num_labels});
    }
  }

  std::vector<std::string> OutputNames() const override {
    if (dhead_ == DeitHead::kWithTeacher) return {"logits", "cls_logits", "distillation_logits"};
    return VisionModel::OutputNames();
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& px = GetInput(inputs, "pixel_values");
    const int64_t b = px.size(0), hid = c_.hidden_size, nh = c_.num_attention_heads;
    const int64_t hd = hid / nh;
    at::Tensor x = nn::PatchEmbed(px, GetWeight(w, patch_w_), GetWeight(w, patch_b_), c_.patch_size);
    x = at::cat({GetWeight(w, cls_).expand({b, 1, hid}), GetWeight(w, dist_).expand({b, 1, hid}), x},
                1) +
        GetWeight(w, pos_);
    const int64_t s = x.size(1);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    auto heads = [&](const at::Tensor& t) { return t.view({b, s, nh, hd}).transpose(1, 2); };
    for (const DeitLayer& l : layers_) {
      at::Tensor y = nn::LayerNorm(x, GetWeight(w, l.ln1), GetWeight(w, l.ln1b), c_.layer_norm_eps);
      at::Tensor q = heads(nn::Linear(y, GetWeight(w, l.q), GetOptionalWeight(w, l.qb)));
      at::Tensor k = heads(nn::Linear(y, GetWeight(w, l.k), GetOptionalWeight(w, l.kb)));
      at::Tensor v = heads(nn::Linear(y, GetWeight(w, l.v), GetOptionalWeight(w, l.vb)));
      at::Tensor ctx =
          nn::Attention(q, k, v, at::Tensor(), scale).transpose(1, 2).reshape({b, s, hid});
      x = x + nn::Linear(ctx, GetWeight(w, l.ao), GetWeight(w, l.aob));
      y = nn::LayerNorm(x, GetWeight(w, l.ln2), GetWeight(w, l.ln2b), c_.layer_norm_eps);
      y = nn::Activate(nn::Linear(y, GetWeight(w, l.inter), GetWeight(w, l.interb)), c_.hidden_act);
      x = x + nn::Linear(y, GetWeight(w, l.out), GetWeight(w, l.outb));
    }
    x = nn::LayerNorm(x, GetWeight(w, ln_), GetWeight(w, lnb_), c_.layer_norm_eps);
    if (dhead_ == DeitHead::kBase) {
      at::Tensor pooled = at::tanh(nn::Linear(x.select(1, 0), GetWeight(w, "pooler.dense.weight"),
                                              GetWeight(w, "pooler.dense.bias")));
      return {x, pooled};
    }
    if (dhead_ == DeitHead::kClassifier) {
      return {nn::Linear(x.select(1, 0), GetWeight(w, "classifier.weight"),
                         GetWeight(w, "classifier.bias"))};
    }
    at::Tensor cls = nn::Linear(x.select(1, 0), GetWeight(w, "cls_classifier.weight"),
                                GetWeight(w, "cls_classifier.bias"));
    at::Tensor dist = nn::Linear(x.select(1, 1), GetWeight(w, "distillation_classifier.weight"),
                                 GetWeight(w, "distillation_classifier.bias"));
    return {(cls + dist) / 2, cls, dist};
  }

 protected:
  std::vector<int64_t> BaseOutputShape() const override { return {tokens_, c_.hidden_size}; }

 private:
  VitConfig c_;
  DeitHead dhead_;
  int64_t tokens_ = 0;
  std::vector<DeitLayer> layers_;
  std::string cls_, dist_, pos_, patch_w_, patch_b_, ln_, lnb_;
};

StatusOr<json> ScaleDeit(const json& config) {
  TS_ASSIGN_OR_RETURN(json t, ScaleToTiny(config, "vit"));
  const int64_t grid = P::kImageSize / P::kPatchSize;
  SetTinyRunProfile(t, grid * grid + 2);
  return t;
}

// ================================================================ ResNet

struct ResNetConfig {
  int64_t num_channels = 3, embedding_size = 64;
  std::vector<int64_t> hidden_sizes, depths;
  bool bottleneck = true, downsample_in_first_stage = false, downsample_in_bottleneck = false;
  Act act;
  int64_t num_labels = 2;
  int64_t image_size = 224;
};

StatusOr<ResNetConfig> ParseResNet(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  ResNetConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.embedding_size, PositiveInt(r, "embedding_size", 64));
  TS_ASSIGN_OR_RETURN(c.hidden_sizes, IntList(config, "hidden_sizes", {256, 512, 1024, 2048}));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {3, 4, 6, 3}));
  TS_RETURN_IF_ERROR(CheckAllPositive("hidden_sizes", c.hidden_sizes));
  TS_RETURN_IF_ERROR(CheckAllPositive("depths", c.depths));
  if (c.hidden_sizes.empty()) return InvalidArgumentError("hidden_sizes: must not be empty");
  TS_RETURN_IF_ERROR(CheckLen("depths", c.depths, c.hidden_sizes.size()));
  TS_ASSIGN_OR_RETURN(std::string lt, r.String("layer_type", "bottleneck"));
  if (lt != "bottleneck" && lt != "basic") return r.Error("layer_type", "unknown '" + lt + "'");
  c.bottleneck = lt == "bottleneck";
  if (c.bottleneck) {
    for (int64_t h : c.hidden_sizes) {
      if (h % 4 != 0) return InvalidArgumentError("hidden_sizes: must be multiples of 4 (bottleneck reduction)");
    }
  }
  TS_ASSIGN_OR_RETURN(c.act, ReadAct(r, "hidden_act", "relu"));
  TS_ASSIGN_OR_RETURN(c.downsample_in_first_stage, r.Bool("downsample_in_first_stage", false));
  TS_ASSIGN_OR_RETURN(c.downsample_in_bottleneck, r.Bool("downsample_in_bottleneck", false));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleResNet(const json& config) {
  TS_ASSIGN_OR_RETURN(ResNetConfig c, ParseResNet(config));
  json t = config;
  const int64_t last = c.hidden_sizes.back();
  std::vector<int64_t> hs;
  // Last stage 128 wide; the stem keeps its ratio (floor 8), so stage 0 keeps its projection
  // shortcut (64 -> 256 in resnet-50 becomes 8 -> 16).
  for (int64_t h : c.hidden_sizes) hs.push_back(std::max<int64_t>(8, ScaleRatio(h, last, 128, 8) / 4 * 4));
  std::vector<int64_t> ds;
  for (int64_t d : c.depths) ds.push_back(std::min<int64_t>(d, 1));
  t["hidden_sizes"] = hs;
  t["depths"] = ds;
  t["embedding_size"] = std::max<int64_t>(8, ScaleRatio(c.embedding_size, last, 128, 8));
  t["image_size"] = P::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

struct ConvBn {
  std::string conv, bn;
  int64_t k = 1, stride = 1;
  bool act = true;
};

class ResNetModel : public VisionModel {
 public:
  ResNetModel(ModelSpec spec, ResNetConfig c, Head head)
      : VisionModel(std::move(spec), head, c.num_channels, c.image_size, c.num_labels),
        c_(std::move(c)) {
    const std::string pre = head == Head::kBase ? "" : "resnet.";
    stem_ = AddConvBn(pre + "embedder.embedder.", c_.num_channels, c_.embedding_size, 7, 2, true);
    int64_t in = c_.embedding_size;
    int64_t hw = image_ / 4;
    for (size_t s = 0; s < c_.hidden_sizes.size(); ++s) {
      const int64_t out = c_.hidden_sizes[s];
      const int64_t stage_stride = s == 0 ? (c_.downsample_in_first_stage ? 2 : 1) : 2;
      for (int64_t l = 0; l < c_.depths[s]; ++l) {
        const int64_t stride = l == 0 ? stage_stride : 1;
        const std::string lp = pre + "encoder.stages." + std::to_string(s) + ".layers." +
                               std::to_string(l) + ".";
        Block b;
        if (in != out || stride != 1) b.shortcut = AddConvBn(lp + "shortcut.", in, out, 1, stride, false);
        b.has_shortcut = in != out || stride != 1;
        if (c_.bottleneck) {
          const int64_t red = out / 4;
          b.layers.push_back(AddConvBn(lp + "layer.0.", in, red, 1,
                                       c_.downsample_in_bottleneck ? stride : 1, true));
          b.layers.push_back(AddConvBn(lp + "layer.1.", red, red, 3,
                                       c_.downsample_in_bottleneck ? 1 : stride, true));
          b.layers.push_back(AddConvBn(lp + "layer.2.", red, out, 1, 1, false));
        } else {
          b.layers.push_back(AddConvBn(lp + "layer.0.", in, out, 3, stride, true));
          b.layers.push_back(AddConvBn(lp + "layer.1.", out, out, 3, 1, false));
        }
        blocks_.push_back(std::move(b));
        in = out;
        hw = (hw + stride - 1) / stride;
      }
    }
    out_hw_ = hw;
    if (head == Head::kClassifier) {
      Add("classifier.1.weight", {c_.num_labels, in});
      Add("classifier.1.bias", {c_.num_labels});
    }
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor x = Run(w, stem_, GetInput(inputs, "pixel_values"));
    x = at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
    for (const Block& b : blocks_) {
      at::Tensor res = b.has_shortcut ? Run(w, b.shortcut, x) : x;
      at::Tensor y = x;
      for (const ConvBn& l : b.layers) y = Run(w, l, y);
      x = Apply(y + res, c_.act);
    }
    at::Tensor pooled = x.mean({2, 3}, /*keepdim=*/true);
    return Finish(x, pooled, w, "classifier.1.");
  }

 protected:
  std::vector<int64_t> BaseOutputShape() const override {
    return {c_.hidden_sizes.back(), out_hw_, out_hw_};
  }

 private:
  struct Block {
    bool has_shortcut = false;
    ConvBn shortcut;
    std::vector<ConvBn> layers;
  };
  ConvBn AddConvBn(const std::string& p, int64_t in, int64_t out, int64_t k, int64_t stride,
                   bool act) {
    ConvBn cb;
    cb.conv = Add(p + "convolution.weight", {out, in, k, k});
    cb.bn = p + "normalization.";
    AddBn(cb.bn, out);
    cb.k = k;
    cb.stride = stride;
    cb.act = act;
    return cb;
  }
  at::Tensor Run(const WeightMap& w, const ConvBn& cb, const at::Tensor& x) const {
    at::Tensor y = Bn(w, cb.bn, Conv(x, GetWeight(w, cb.conv), at::Tensor(), cb.stride, cb.k / 2), 1e-5);
    return cb.act ? Apply(y, c_.act) : y;
  }

  ResNetConfig c_;
  ConvBn stem_;
  std::vector<Block> blocks_;
  int64_t out_hw_ = 1;
};

// ================================================================ ConvNeXt

struct ConvNextConfig {
  int64_t num_channels = 3, patch_size = 4, image_size = 224;
  std::vector<int64_t> hidden_sizes, depths;
  Act act;
  double layer_norm_eps = 1e-12, layer_scale_init_value = 1e-6;
  int64_t num_labels = 2;
};

StatusOr<ConvNextConfig> ParseConvNext(const json& config) {
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
  TS_ASSIGN_OR_RETURN(int64_t stages, PositiveInt(r, "num_stages", static_cast<int64_t>(c.hidden_sizes.size())));
  TS_RETURN_IF_ERROR(CheckLen("hidden_sizes", c.hidden_sizes, static_cast<size_t>(stages)));
  TS_RETURN_IF_ERROR(CheckLen("depths", c.depths, static_cast<size_t>(stages)));
  TS_ASSIGN_OR_RETURN(c.act, ReadAct(r, "hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(c.layer_norm_eps, r.Double("layer_norm_eps", 1e-12));
  TS_ASSIGN_OR_RETURN(c.layer_scale_init_value, r.Double("layer_scale_init_value", 1e-6));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleConvNext(const json& config) {
  TS_ASSIGN_OR_RETURN(ConvNextConfig c, ParseConvNext(config));
  json t = config;
  const int64_t last = c.hidden_sizes.back();
  std::vector<int64_t> hs, ds;
  for (int64_t h : c.hidden_sizes) hs.push_back(ScaleRatio(h, last, 64, 8));
  for (int64_t d : c.depths) ds.push_back(std::min<int64_t>(d, 1));
  t["hidden_sizes"] = hs;
  t["depths"] = ds;
  t["image_size"] = P::kImageSize;
  t["patch_size"] = std::min<int64_t>(c.patch_size, 4);
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

class ConvNextModel : public VisionModel {
 public:
  ConvNextModel(ModelSpec spec, ConvNextConfig c, Head head)
      : VisionModel(std::move(spec), head, c.num_channels, c.image_size, c.num_labels),
        c_(std::move(c)) {
    pre_ = head == Head::kBase ? "" : "convnext.";
    const int64_t h0 = c_.hidden_sizes[0];
    Add(pre_ + "embeddings.patch_embeddings.weight", {h0, c_.num_channels, c_.patch_size, c_.patch_size});
    Add(pre_ + "embeddings.patch_embeddings.bias", {h0});
    Add(pre_ + "embeddings.layernorm.weight", {h0});
    Add(pre_ + "embeddings.layernorm.bias", {h0});
    int64_t in = h0;
    hw_ = c_.image_size / c_.patch_size;
    for (size_t s = 0; s < c_.hidden_sizes.size(); ++s) {
      const int64_t out = c_.hidden_sizes[s];
      const std::string sp = pre_ + "encoder.stages." + std::to_string(s) + ".";
      const bool down = s > 0;
      if (down) {
        Add(sp + "downsampling_layer.0.weight", {in});
        Add(sp + "downsampling_layer.0.bias", {in});
        Add(sp + "downsampling_layer.1.weight", {out, in, 2, 2});
        Add(sp + "downsampling_layer.1.bias", {out});
        hw_ /= 2;
      }
      for (int64_t l = 0; l < c_.depths[s]; ++l) {
        const std::string lp = sp + "layers." + std::to_string(l) + ".";
        Add(lp + "dwconv.weight", {out, 1, 7, 7});
        Add(lp + "dwconv.bias", {out});
        Add(lp + "layernorm.weight", {out});
        Add(lp + "layernorm.bias", {out});
        Add(lp + "pwconv1.weight", {4 * out, out});
        Add(lp + "pwconv1.bias", {4 * out});
        Add(lp + "pwconv2.weight", {out, 4 * out});
        Add(lp + "pwconv2.bias", {out});
        if (c_.layer_scale_init_value > 0) Add(lp + "layer_scale_parameter", {out});
      }
      in = out;
    }
    Add(pre_ + "layernorm.weight", {in});
    Add(pre_ + "layernorm.bias", {in});
    if (head == Head::kClassifier) {
      Add("classifier.weight", {c_.num_labels, in});
      Add("classifier.bias", {c_.num_labels});
    }
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const std::string& p = pre_;
    at::Tensor x = Conv(GetInput(inputs, "pixel_values"), GetWeight(w, p + "embeddings.patch_embeddings.weight"),
                        GetWeight(w, p + "embeddings.patch_embeddings.bias"), c_.patch_size, 0);
    x = LnChannels(w, p + "embeddings.layernorm.", x, 1e-6);
    for (size_t s = 0; s < c_.hidden_sizes.size(); ++s) {
      const std::string sp = p + "encoder.stages." + std::to_string(s) + ".";
      if (s > 0) {
        x = LnChannels(w, sp + "downsampling_layer.0.", x, 1e-6);
        x = Conv(x, GetWeight(w, sp + "downsampling_layer.1.weight"),
                 GetWeight(w, sp + "downsampling_layer.1.bias"), 2, 0);
      }
      const int64_t ch = c_.hidden_sizes[s];
      for (int64_t l = 0; l < c_.depths[s]; ++l) {
        const std::string lp = sp + "layers." + std::to_string(l) + ".";
        at::Tensor y = Conv(x, GetWeight(w, lp + "dwconv.weight"), GetWeight(w, lp + "dwconv.bias"), 1, 3, ch);
        y = y.permute({0, 2, 3, 1});
        y = nn::LayerNorm(y, GetWeight(w, lp + "layernorm.weight"), GetWeight(w, lp + "layernorm.bias"), 1e-6);
        y = Apply(nn::Linear(y, GetWeight(w, lp + "pwconv1.weight"), GetWeight(w, lp + "pwconv1.bias")), c_.act);
        y = nn::Linear(y, GetWeight(w, lp + "pwconv2.weight"), GetWeight(w, lp + "pwconv2.bias"));
        if (c_.layer_scale_init_value > 0) y = GetWeight(w, lp + "layer_scale_parameter") * y;
        x = x + y.permute({0, 3, 1, 2});
      }
    }
    at::Tensor pooled = nn::LayerNorm(x.mean({2, 3}), GetWeight(w, p + "layernorm.weight"),
                                      GetWeight(w, p + "layernorm.bias"), c_.layer_norm_eps);
    return Finish(x, pooled, w, "classifier.");
  }

 protected:
  std::vector<int64_t> BaseOutputShape() const override { return {c_.hidden_sizes.back(), hw_, hw_}; }

 private:
  ConvNextConfig c_;
  std::string pre_;
  int64_t hw_ = 1;
};

// ================================================================ MobileNetV2 / EfficientNet

// TensorFlow "SAME" padding for a k x k conv of stride s (HF apply_tf_padding).
at::Tensor TfPad(const at::Tensor& x, int64_t k, int64_t s) {
  auto along = [&](int64_t in) {
    return in % s == 0 ? std::max<int64_t>(k - s, 0) : std::max<int64_t>(k - in % s, 0);
  };
  const int64_t ph = along(x.size(2)), pw = along(x.size(3));
  return at::constant_pad_nd(x, {pw / 2, pw - pw / 2, ph / 2, ph - ph / 2}, 0.0);
}

// HF make_divisible.
int64_t MakeDivisible(double value, int64_t divisor, int64_t min_value) {
  int64_t v = std::max<int64_t>(min_value, static_cast<int64_t>(value + static_cast<double>(divisor) / 2.0) /
                                               divisor * divisor);
  if (static_cast<double>(v) < 0.9 * value) v += divisor;
  return v;
}

// conv (no bias) + eval BatchNorm + optional activation.
struct ConvLayer {
  std::string conv, bn;
  int64_t k = 1, stride = 1, groups = 1;
  bool act = true;
  // Padding: tf "same" (MobileNetV2 tf_padding), explicit {l, r, t, b}, or symmetric k / 2.
  bool tf_pad = false;
  std::vector<int64_t> pad;
};

class ConvNetModel : public VisionModel {
 public:
  using VisionModel::VisionModel;

 protected:
  ConvLayer AddLayer(const std::string& p, const std::string& conv_name, const std::string& bn_name,
                     int64_t in, int64_t out, int64_t k, int64_t stride, int64_t groups, bool act) {
    ConvLayer l;
    l.conv = Add(p + conv_name + ".weight", {out, in / groups, k, k});
    l.bn = p + bn_name + ".";
    AddBn(l.bn, out);
    l.k = k;
    l.stride = stride;
    l.groups = groups;
    l.act = act;
    return l;
  }
  at::Tensor Run(const WeightMap& w, const ConvLayer& l, at::Tensor x, double eps, const Act& a) const {
    int64_t padding = 0;
    if (l.tf_pad) {
      x = TfPad(x, l.k, l.stride);
    } else if (!l.pad.empty()) {
      x = at::constant_pad_nd(x, l.pad, 0.0);
    } else {
      padding = l.k / 2;
    }
    at::Tensor y = Bn(w, l.bn, Conv(x, GetWeight(w, l.conv), at::Tensor(), l.stride, padding, l.groups), eps);
    return l.act ? Apply(y, a) : y;
  }
};

struct MobileNetV2Config {
  int64_t num_channels = 3, image_size = 224, depth_divisible_by = 8, min_depth = 8;
  double depth_multiplier = 1.0, expand_ratio = 6.0, layer_norm_eps = 1e-3;
  bool first_layer_is_expansion = true, finegrained_output = true, tf_padding = true;
  Act act;
  int64_t num_labels = 2;
};

StatusOr<MobileNetV2Config> ParseMobileNetV2(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  MobileNetV2Config c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.depth_multiplier, r.Double("depth_multiplier", 1.0));
  if (c.depth_multiplier <= 0) return r.Error("depth_multiplier", "must be positive");
  TS_ASSIGN_OR_RETURN(c.depth_divisible_by, PositiveInt(r, "depth_divisible_by", 8));
  TS_ASSIGN_OR_RETURN(c.min_depth, PositiveInt(r, "min_depth", 8));
  TS_ASSIGN_OR_RETURN(c.expand_ratio, r.Double("expand_ratio", 6.0));
  if (c.expand_ratio <= 0) return r.Error("expand_ratio", "must be positive");
  TS_ASSIGN_OR_RETURN(int64_t output_stride, PositiveInt(r, "output_stride", 32));
  if (output_stride != 32) return r.Error("output_stride", "only 32 is supported (no dilation)");
  TS_ASSIGN_OR_RETURN(c.first_layer_is_expansion, r.Bool("first_layer_is_expansion", true));
  TS_ASSIGN_OR_RETURN(c.finegrained_output, r.Bool("finegrained_output", true));
  TS_ASSIGN_OR_RETURN(c.tf_padding, r.Bool("tf_padding", true));
  TS_ASSIGN_OR_RETURN(c.layer_norm_eps, r.Double("layer_norm_eps", 1e-3));
  TS_ASSIGN_OR_RETURN(c.act, ReadAct(r, "hidden_act", "relu6"));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleMobileNetV2(const json& config) {
  TS_ASSIGN_OR_RETURN(MobileNetV2Config c, ParseMobileNetV2(config));
  json t = config;
  t["depth_multiplier"] = std::min(c.depth_multiplier, 0.25);
  t["image_size"] = P::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

class MobileNetV2Model : public ConvNetModel {
 public:
  MobileNetV2Model(ModelSpec spec, MobileNetV2Config c, Head head)
      : ConvNetModel(std::move(spec), head, c.num_channels, c.image_size, c.num_labels),
        c_(std::move(c)) {
    const std::string pre = head == Head::kBase ? "" : "mobilenet_v2.";
    auto mult = [&](double ch) {
      return MakeDivisible(std::round(ch * c_.depth_multiplier), c_.depth_divisible_by, c_.min_depth);
    };
    std::vector<int64_t> ch;
    for (int64_t v : {16, 24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 160, 160, 160, 320})
      ch.push_back(mult(static_cast<double>(v)));
    const std::vector<int64_t> strides = {2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1};
    const int64_t expanded = mult(32);
    auto layer = [&](const std::string& p, int64_t in, int64_t out, int64_t k, int64_t s, int64_t g,
                     bool act) {
      ConvLayer l = AddLayer(p, "convolution", "normalization", in, out, k, s, g, act);
      l.tf_pad = c_.tf_padding;
      return l;
    };
    const std::string sp = pre + "conv_stem.";
    stem_.push_back(layer(sp + "first_conv.", c_.num_channels, expanded, 3, 2, 1, true));
    if (!c_.first_layer_is_expansion) stem_.push_back(layer(sp + "expand_1x1.", expanded, expanded, 1, 1, 1, true));
    stem_.push_back(layer(sp + "conv_3x3.", expanded, expanded, 3, 1, expanded, true));
    stem_.push_back(layer(sp + "reduce_1x1.", expanded, ch[0], 1, 1, 1, false));
    for (size_t i = 0; i < strides.size(); ++i) {
      const std::string lp = pre + "layer." + std::to_string(i) + ".";
      const int64_t in = ch[i], out = ch[i + 1];
      const int64_t e = MakeDivisible(std::round(static_cast<double>(in) * c_.expand_ratio),
                                      c_.depth_divisible_by, c_.min_depth);
      Block b;
      b.residual = strides[i] == 1 && in == out;
      b.layers.push_back(layer(lp + "expand_1x1.", in, e, 1, 1, 1, true));
      b.layers.push_back(layer(lp + "conv_3x3.", e, e, 3, strides[i], e, true));
      b.layers.push_back(layer(lp + "reduce_1x1.", e, out, 1, 1, 1, false));
      blocks_.push_back(std::move(b));
    }
    out_ch_ = c_.finegrained_output && c_.depth_multiplier < 1.0 ? 1280 : mult(1280);
    top_ = layer(pre + "conv_1x1.", ch.back(), out_ch_, 1, 1, 1, true);
    hw_ = (c_.image_size + 31) / 32;
    if (head == Head::kClassifier) {
      Add("classifier.weight", {c_.num_labels, out_ch_});
      Add("classifier.bias", {c_.num_labels});
    }
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const double eps = c_.layer_norm_eps;
    at::Tensor x = GetInput(inputs, "pixel_values");
    for (const ConvLayer& l : stem_) x = Run(w, l, x, eps, c_.act);
    for (const Block& b : blocks_) {
      at::Tensor y = x;
      for (const ConvLayer& l : b.layers) y = Run(w, l, y, eps, c_.act);
      x = b.residual ? x + y : y;
    }
    x = Run(w, top_, x, eps, c_.act);
    return Finish(x, x.mean({2, 3}), w, "classifier.");
  }

  // The depthwise layers (tests).
  int64_t DepthwiseGroups(size_t block) const { return blocks_.at(block).layers.at(1).groups; }

 protected:
  std::vector<int64_t> BaseOutputShape() const override { return {out_ch_, hw_, hw_}; }

 private:
  struct Block {
    bool residual = false;
    std::vector<ConvLayer> layers;
  };
  MobileNetV2Config c_;
  std::vector<ConvLayer> stem_;
  std::vector<Block> blocks_;
  ConvLayer top_;
  int64_t out_ch_ = 0, hw_ = 1;
};

struct EfficientNetConfig {
  int64_t num_channels = 3, image_size = 600, hidden_dim = 2560, depth_divisor = 8;
  double width_coefficient = 2.0, depth_coefficient = 3.1, se_ratio = 0.25, bn_eps = 1e-3;
  std::vector<int64_t> kernel_sizes, in_channels, out_channels, strides, repeats, expand_ratios,
      depthwise_padding;
  Act act;
  int64_t num_labels = 2;
  int64_t RoundFilters(int64_t ch) const {
    const double v = static_cast<double>(ch) * width_coefficient;
    int64_t d = std::max<int64_t>(depth_divisor,
                                  static_cast<int64_t>(v + static_cast<double>(depth_divisor) / 2.0) /
                                      depth_divisor * depth_divisor);
    if (static_cast<double>(d) < 0.9 * v) d += depth_divisor;
    return d;
  }
  int64_t RoundRepeats(int64_t r) const {
    return static_cast<int64_t>(std::ceil(depth_coefficient * static_cast<double>(r)));
  }
};

StatusOr<EfficientNetConfig> ParseEfficientNet(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  EfficientNetConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 600));
  TS_ASSIGN_OR_RETURN(c.width_coefficient, r.Double("width_coefficient", 2.0));
  if (c.width_coefficient <= 0) return r.Error("width_coefficient", "must be positive");
  TS_ASSIGN_OR_RETURN(c.depth_coefficient, r.Double("depth_coefficient", 3.1));
  if (c.depth_coefficient <= 0) return r.Error("depth_coefficient", "must be positive");
  TS_ASSIGN_OR_RETURN(c.depth_divisor, PositiveInt(r, "depth_divisor", 8));
  TS_ASSIGN_OR_RETURN(c.kernel_sizes, IntList(config, "kernel_sizes", {3, 3, 5, 3, 5, 5, 3}));
  TS_ASSIGN_OR_RETURN(c.in_channels, IntList(config, "in_channels", {32, 16, 24, 40, 80, 112, 192}));
  TS_ASSIGN_OR_RETURN(c.out_channels, IntList(config, "out_channels", {16, 24, 40, 80, 112, 192, 320}));
  TS_ASSIGN_OR_RETURN(c.strides, IntList(config, "strides", {1, 2, 2, 2, 1, 2, 1}));
  TS_ASSIGN_OR_RETURN(c.repeats, IntList(config, "num_block_repeats", {1, 2, 2, 3, 3, 4, 1}));
  TS_ASSIGN_OR_RETURN(c.expand_ratios, IntList(config, "expand_ratios", {1, 6, 6, 6, 6, 6, 6}));
  TS_ASSIGN_OR_RETURN(c.depthwise_padding, IntList(config, "depthwise_padding", {}));
  const size_t n = c.in_channels.size();
  if (n == 0) return InvalidArgumentError("in_channels: must not be empty");
  for (const auto& [name, v] :
       std::vector<std::pair<std::string, const std::vector<int64_t>*>>{
           {"kernel_sizes", &c.kernel_sizes}, {"in_channels", &c.in_channels},
           {"out_channels", &c.out_channels}, {"strides", &c.strides},
           {"num_block_repeats", &c.repeats}, {"expand_ratios", &c.expand_ratios}}) {
    TS_RETURN_IF_ERROR(CheckLen(name, *v, n));
    TS_RETURN_IF_ERROR(CheckAllPositive(name, *v));
  }
  for (int64_t k : c.kernel_sizes) {
    if (k % 2 == 0) return InvalidArgumentError("kernel_sizes: must be odd, got " + std::to_string(k));
  }
  for (int64_t s : c.strides) {
    if (s > 2) return InvalidArgumentError("strides: must be 1 or 2, got " + std::to_string(s));
  }
  TS_ASSIGN_OR_RETURN(c.se_ratio, r.Double("squeeze_expansion_ratio", 0.25));
  TS_ASSIGN_OR_RETURN(c.bn_eps, r.Double("batch_norm_eps", 1e-3));
  TS_ASSIGN_OR_RETURN(c.hidden_dim, PositiveInt(r, "hidden_dim", 2560));
  if (c.hidden_dim != c.RoundFilters(1280)) {
    return r.Error("hidden_dim", "must equal round_filters(1280) = " +
                                     std::to_string(c.RoundFilters(1280)) + ", got " +
                                     std::to_string(c.hidden_dim));
  }
  TS_ASSIGN_OR_RETURN(c.act, ReadAct(r, "hidden_act", "swish"));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleEfficientNet(const json& config) {
  TS_ASSIGN_OR_RETURN(EfficientNetConfig c, ParseEfficientNet(config));
  json t = config;
  const int64_t max_rep = *std::max_element(c.repeats.begin(), c.repeats.end());
  c.width_coefficient = std::min(c.width_coefficient, 0.25);
  c.depth_coefficient = std::min(c.depth_coefficient, 1.0 / static_cast<double>(max_rep));
  t["width_coefficient"] = c.width_coefficient;
  t["depth_coefficient"] = c.depth_coefficient;
  t["hidden_dim"] = c.RoundFilters(1280);
  t["image_size"] = P::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

class EfficientNetModel : public ConvNetModel {
 public:
  EfficientNetModel(ModelSpec spec, EfficientNetConfig c, Head head)
      : ConvNetModel(std::move(spec), head, c.num_channels, c.image_size, c.num_labels),
        c_(std::move(c)) {
    const std::string pre = head == Head::kBase ? "" : "efficientnet.";
    const int64_t stem = c_.RoundFilters(32);
    stem_ = AddLayer(pre + "embeddings.", "convolution", "batchnorm", c_.num_channels, stem, 3, 2, 1, true);
    stem_.pad = {0, 1, 0, 1};
    hw_ = c_.image_size / 2;
    int64_t block_num = 0;
    for (size_t i = 0; i < c_.in_channels.size(); ++i) {
      const int64_t out = c_.RoundFilters(c_.out_channels[i]);
      for (int64_t j = 0; j < c_.RoundRepeats(c_.repeats[i]); ++j, ++block_num) {
        const int64_t in = j == 0 ? c_.RoundFilters(c_.in_channels[i]) : out;
        const int64_t stride = j == 0 ? c_.strides[i] : 1;
        const int64_t k = c_.kernel_sizes[i];
        const int64_t ratio = c_.expand_ratios[i];
        const int64_t e = in * ratio;
        const std::string bp = pre + "encoder.blocks." + std::to_string(block_num) + ".";
        Block b;
        b.expand = ratio != 1;
        if (b.expand) b.expansion = AddLayer(bp + "expansion.", "expand_conv", "expand_bn", in, e, 1, 1, 1, true);
        b.depthwise = AddLayer(bp + "depthwise_conv.", "depthwise_conv", "depthwise_norm", e, e, k, stride, e, true);
        if (stride == 2) {
          const bool adjust = std::find(c_.depthwise_padding.begin(), c_.depthwise_padding.end(),
                                        block_num) == c_.depthwise_padding.end();
          const int64_t h = k / 2;
          b.depthwise.pad = adjust ? std::vector<int64_t>{h - 1, h, h - 1, h}
                                   : std::vector<int64_t>{h, h, h, h};
          hw_ = (hw_ + 1) / 2;
        }
        const int64_t se = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(in) * c_.se_ratio));
        b.se = bp + "squeeze_excite.";
        Add(b.se + "reduce.weight", {se, e, 1, 1});
        Add(b.se + "reduce.bias", {se});
        Add(b.se + "expand.weight", {e, se, 1, 1});
        Add(b.se + "expand.bias", {e});
        b.project = AddLayer(bp + "projection.", "project_conv", "project_bn", e, out, 1, 1, 1, false);
        b.residual = stride == 1 && j != 0;
        blocks_.push_back(std::move(b));
      }
    }
    const int64_t last = c_.RoundFilters(c_.out_channels.back());
    top_ = AddLayer(pre + "encoder.", "top_conv", "top_bn", last, c_.RoundFilters(1280), 1, 1, 1, true);
    if (head == Head::kClassifier) {
      Add("classifier.weight", {c_.num_labels, c_.hidden_dim});
      Add("classifier.bias", {c_.num_labels});
    }
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const double eps = c_.bn_eps;
    at::Tensor x = Run(w, stem_, GetInput(inputs, "pixel_values"), eps, c_.act);
    for (const Block& b : blocks_) {
      at::Tensor y = b.expand ? Run(w, b.expansion, x, eps, c_.act) : x;
      y = Run(w, b.depthwise, y, eps, c_.act);
      at::Tensor s = y.mean({2, 3}, /*keepdim=*/true);
      s = Apply(Conv(s, GetWeight(w, b.se + "reduce.weight"), GetWeight(w, b.se + "reduce.bias"), 1, 0), c_.act);
      s = at::sigmoid(Conv(s, GetWeight(w, b.se + "expand.weight"), GetWeight(w, b.se + "expand.bias"), 1, 0));
      y = Run(w, b.project, y * s, eps, c_.act);
      x = b.residual ? y + x : y;
    }
    x = Run(w, top_, x, eps, c_.act);
    return Finish(x, x.mean({2, 3}), w, "classifier.");
  }

 protected:
  std::vector<int64_t> BaseOutputShape() const override { return {c_.RoundFilters(1280), hw_, hw_}; }

 private:
  struct Block {
    bool expand = false, residual = false;
    ConvLayer expansion, depthwise, project;
    std::string se;
  };
  EfficientNetConfig c_;
  ConvLayer stem_, top_;
  std::vector<Block> blocks_;
  int64_t hw_ = 1;
};

// ================================================================ Swin

struct SwinConfig {
  int64_t image_size = 224, patch_size = 4, num_channels = 3, embed_dim = 96, window_size = 7;
  std::vector<int64_t> depths, num_heads;
  double mlp_ratio = 4.0, eps = 1e-5;
  bool qkv_bias = true;
  Act act;
  int64_t num_labels = 2;
};

StatusOr<SwinConfig> ParseSwin(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  SwinConfig c;
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.patch_size, PositiveInt(r, "patch_size", 4));
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.embed_dim, PositiveInt(r, "embed_dim", 96));
  TS_ASSIGN_OR_RETURN(c.window_size, PositiveInt(r, "window_size", 7));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {2, 2, 6, 2}));
  TS_ASSIGN_OR_RETURN(c.num_heads, IntList(config, "num_heads", {3, 6, 12, 24}));
  TS_RETURN_IF_ERROR(CheckAllPositive("depths", c.depths));
  TS_RETURN_IF_ERROR(CheckAllPositive("num_heads", c.num_heads));
  if (c.depths.empty()) return InvalidArgumentError("depths: must not be empty");
  TS_RETURN_IF_ERROR(CheckLen("num_heads", c.num_heads, c.depths.size()));
  if (c.image_size % c.patch_size != 0) return r.Error("patch_size", "must divide image_size");
  int64_t res = c.image_size / c.patch_size;
  for (size_t i = 0; i < c.depths.size(); ++i) {
    const int64_t dim = c.embed_dim << i;
    if (dim % c.num_heads[i] != 0) {
      return InvalidArgumentError("num_heads: " + std::to_string(c.num_heads[i]) +
                                  " must divide the stage width " + std::to_string(dim));
    }
    if (res < c.window_size || res % c.window_size != 0) {
      return r.Error("window_size", "must divide every stage resolution and not exceed it (stage " +
                                        std::to_string(i) + ": " + std::to_string(res) + ")");
    }
    if (i + 1 < c.depths.size()) {
      if (res % 2 != 0) return r.Error("image_size", "stage resolutions must be even for patch merging");
      res /= 2;
    }
  }
  TS_ASSIGN_OR_RETURN(c.mlp_ratio, r.Double("mlp_ratio", 4.0));
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_eps", 1e-5));
  TS_ASSIGN_OR_RETURN(c.qkv_bias, r.Bool("qkv_bias", true));
  TS_ASSIGN_OR_RETURN(c.act, ReadAct(r, "hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(bool abs_pos, r.Bool("use_absolute_embeddings", false));
  if (abs_pos) return r.Error("use_absolute_embeddings", "not supported");
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleSwin(const json& config) {
  TS_ASSIGN_OR_RETURN(SwinConfig c, ParseSwin(config));
  json t = config;
  // Two stages (8x8 then 4x4 tokens), window 4: stage 0 has a shifted-window block, stage 1's
  // window covers its whole grid (as the real model's last stage).
  const size_t stages = std::min<size_t>(c.depths.size(), 2);
  std::vector<int64_t> depths, heads;
  for (size_t i = 0; i < stages; ++i) {
    depths.push_back(std::min<int64_t>(c.depths[i], 2));
    heads.push_back(int64_t{2} << i);
  }
  t["depths"] = depths;
  t["num_heads"] = heads;
  t["embed_dim"] = 32;
  t["image_size"] = P::kImageSize;
  t["patch_size"] = 4;
  t["window_size"] = 4;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 64);
  return t;
}

class SwinModel : public VisionModel {
 public:
  SwinModel(ModelSpec spec, SwinConfig c, Head head)
      : VisionModel(std::move(spec), head, c.num_channels, c.image_size, c.num_labels),
        c_(std::move(c)) {
    pre_ = head == Head::kBase ? "" : "swin.";
    const int64_t e = c_.embed_dim, p = c_.patch_size, ws = c_.window_size;
    Add(pre_ + "embeddings.patch_embeddings.projection.weight", {e, c_.num_channels, p, p});
    Add(pre_ + "embeddings.patch_embeddings.projection.bias", {e});
    Add(pre_ + "embeddings.norm.weight", {e});
    Add(pre_ + "embeddings.norm.bias", {e});
    int64_t dim = e;
    for (size_t s = 0; s < c_.depths.size(); ++s) {
      const std::string sp = pre_ + "encoder.layers." + std::to_string(s) + ".";
      const int64_t mlp = static_cast<int64_t>(c_.mlp_ratio * static_cast<double>(dim));
      for (int64_t j = 0; j < c_.depths[s]; ++j) {
        const std::string bp = sp + "blocks." + std::to_string(j) + ".";
        Add(bp + "layernorm_before.weight", {dim});
        Add(bp + "layernorm_before.bias", {dim});
        Add(bp + "attention.self.relative_position_bias_table", {(2 * ws - 1) * (2 * ws - 1), c_.num_heads[s]});
        for (const char* n : {"query", "key", "value"}) {
          Add(bp + "attention.self." + n + ".weight", {dim, dim});
          if (c_.qkv_bias) Add(bp + "attention.self." + n + ".bias", {dim});
        }
        Add(bp + "attention.output.dense.weight", {dim, dim});
        Add(bp + "attention.output.dense.bias", {dim});
        Add(bp + "layernorm_after.weight", {dim});
        Add(bp + "layernorm_after.bias", {dim});
        Add(bp + "intermediate.dense.weight", {mlp, dim});
        Add(bp + "intermediate.dense.bias", {mlp});
        Add(bp + "output.dense.weight", {dim, mlp});
        Add(bp + "output.dense.bias", {dim});
      }
      if (s + 1 < c_.depths.size()) {
        Add(sp + "downsample.reduction.weight", {2 * dim, 4 * dim});
        Add(sp + "downsample.norm.weight", {4 * dim});
        Add(sp + "downsample.norm.bias", {4 * dim});
        dim *= 2;
      }
    }
    dim_ = dim;
    Add(pre_ + "layernorm.weight", {dim});
    Add(pre_ + "layernorm.bias", {dim});
    if (head == Head::kClassifier) {
      Add("classifier.weight", {c_.num_labels, dim});
      Add("classifier.bias", {c_.num_labels});
    }
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& px = GetInput(inputs, "pixel_values");
    const int64_t b = px.size(0);
    at::Tensor x = nn::PatchEmbed(px, GetWeight(w, pre_ + "embeddings.patch_embeddings.projection.weight"),
                                  GetWeight(w, pre_ + "embeddings.patch_embeddings.projection.bias"),
                                  c_.patch_size);
    x = LnSeq(w, pre_ + "embeddings.norm", x);
    int64_t res = c_.image_size / c_.patch_size, dim = c_.embed_dim;
    for (size_t s = 0; s < c_.depths.size(); ++s) {
      const std::string sp = pre_ + "encoder.layers." + std::to_string(s) + ".";
      const int64_t ws = std::min(c_.window_size, res);
      for (int64_t j = 0; j < c_.depths[s]; ++j) {
        const int64_t shift = (j % 2 == 1 && res > c_.window_size) ? c_.window_size / 2 : 0;
        x = Block(w, sp + "blocks." + std::to_string(j) + ".", x, b, res, dim, c_.num_heads[s], ws, shift);
      }
      if (s + 1 < c_.depths.size()) {
        at::Tensor g = x.view({b, res, res, dim});
        at::Tensor x0 = g.slice(1, 0, res, 2).slice(2, 0, res, 2);
        at::Tensor x1 = g.slice(1, 1, res, 2).slice(2, 0, res, 2);
        at::Tensor x2 = g.slice(1, 0, res, 2).slice(2, 1, res, 2);
        at::Tensor x3 = g.slice(1, 1, res, 2).slice(2, 1, res, 2);
        x = at::cat({x0, x1, x2, x3}, -1).reshape({b, -1, 4 * dim});
        x = nn::Linear(LnSeq(w, sp + "downsample.norm", x), GetWeight(w, sp + "downsample.reduction.weight"));
        res /= 2;
        dim *= 2;
      }
    }
    x = LnSeq(w, pre_ + "layernorm", x);
    return Finish(x, x.mean(1), w, "classifier.");
  }

 protected:
  std::vector<int64_t> BaseOutputShape() const override {
    int64_t res = c_.image_size / c_.patch_size;
    for (size_t s = 0; s + 1 < c_.depths.size(); ++s) res /= 2;
    return {res * res, dim_};
  }

 private:
  at::Tensor LnSeq(const WeightMap& w, const std::string& p, const at::Tensor& x) const {
    return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), c_.eps);
  }

  // [B, res, res, C] -> [B * nW, ws * ws, C]
  static at::Tensor Partition(const at::Tensor& x, int64_t ws) {
    const int64_t b = x.size(0), h = x.size(1), c = x.size(3);
    return x.view({b, h / ws, ws, h / ws, ws, c}).permute({0, 1, 3, 2, 4, 5}).reshape({-1, ws * ws, c});
  }
  static at::Tensor Merge(const at::Tensor& x, int64_t b, int64_t res, int64_t ws) {
    const int64_t c = x.size(-1);
    return x.view({b, res / ws, res / ws, ws, ws, c}).permute({0, 1, 3, 2, 4, 5}).reshape({b, res, res, c});
  }

  at::Tensor Block(const WeightMap& w, const std::string& bp, const at::Tensor& x, int64_t b,
                   int64_t res, int64_t dim, int64_t heads, int64_t ws, int64_t shift) const {
    const auto dev = x.device();
    const auto lopts = at::TensorOptions().dtype(at::kLong).device(dev);
    at::Tensor y = LnSeq(w, bp + "layernorm_before", x).view({b, res, res, dim});
    if (shift > 0) y = at::roll(y, {-shift, -shift}, {1, 2});
    at::Tensor win = Partition(y, ws);  // [B*nW, N, C]
    const int64_t n = ws * ws, bw = win.size(0), hd = dim / heads;
    auto proj = [&](const char* name) {
      const std::string p = bp + "attention.self." + name;
      return nn::Linear(win, GetWeight(w, p + ".weight"), c_.qkv_bias ? GetWeight(w, p + ".bias") : at::Tensor())
          .view({bw, n, heads, hd})
          .transpose(1, 2);
    };
    at::Tensor q = proj("query"), k = proj("key"), v = proj("value");
    at::Tensor scores = nn::Matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(hd));
    // Relative position bias: index (dh + ws - 1) * (2 ws - 1) + (dw + ws - 1).
    at::Tensor idx = at::arange(n, lopts);
    at::Tensor ih = at::div(idx, ws, "floor"), iw = at::remainder(idx, ws);
    at::Tensor rel = (ih.unsqueeze(1) - ih.unsqueeze(0) + (ws - 1)) * (2 * ws - 1) +
                     (iw.unsqueeze(1) - iw.unsqueeze(0) + (ws - 1));
    const at::Tensor& table = GetWeight(w, bp + "attention.self.relative_position_bias_table");
    at::Tensor bias = table.index_select(0, rel.reshape({-1})).view({n, n, heads}).permute({2, 0, 1});
    scores = scores + bias.unsqueeze(0);
    if (shift > 0) {
      // Region ids of the shifted image (HF img_mask), partitioned into windows.
      at::Tensor r = at::arange(res, lopts);
      at::Tensor reg = (r >= res - ws).to(at::kLong) + (r >= res - shift).to(at::kLong);
      at::Tensor ids = (reg.unsqueeze(1) * 3 + reg.unsqueeze(0)).view({1, res, res, 1});
      at::Tensor mw = Partition(ids, ws).squeeze(-1);  // [nW, N]
      at::Tensor mask = (mw.unsqueeze(1) != mw.unsqueeze(2)).to(scores.scalar_type()) * -100.0;
      const int64_t nw = mw.size(0);
      scores = (scores.view({bw / nw, nw, heads, n, n}) + mask.unsqueeze(1).unsqueeze(0)).view({bw, heads, n, n});
    }
    at::Tensor ctx = nn::Matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({bw, n, dim});
    ctx = nn::Linear(ctx, GetWeight(w, bp + "attention.output.dense.weight"),
                     GetWeight(w, bp + "attention.output.dense.bias"));
    at::Tensor merged = Merge(ctx, b, res, ws);
    if (shift > 0) merged = at::roll(merged, {shift, shift}, {1, 2});
    at::Tensor h = x + merged.reshape({b, res * res, dim});
    at::Tensor m = LnSeq(w, bp + "layernorm_after", h);
    m = Apply(nn::Linear(m, GetWeight(w, bp + "intermediate.dense.weight"), GetWeight(w, bp + "intermediate.dense.bias")), c_.act);
    return h + nn::Linear(m, GetWeight(w, bp + "output.dense.weight"), GetWeight(w, bp + "output.dense.bias"));
  }

  SwinConfig c_;
  std::string pre_;
  int64_t dim_ = 0;
};

// ---- registration helpers.

template <typename ModelT, typename ConfigT>
std::function<StatusOr<std::unique_ptr<Model>>(ModelSpec)> Builder(
    StatusOr<ConfigT> (*parse)(const json&), Head head) {
  return [parse, head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(ConfigT c, parse(spec.tiny_config));
    return std::unique_ptr<Model>(std::make_unique<ModelT>(std::move(spec), std::move(c), head));
  };
}

json WithArch(json j, const std::string& arch) {
  j["architectures"] = {arch};
  return j;
}

}  // namespace

std::vector<ArchEntry> VisionZooArchs() {
  std::vector<ArchEntry> out;
  // ---- DeiT, modelled on facebook/deit-base-distilled-patch16-224.
  const json deit = {{"model_type", "deit"}, {"hidden_size", 768}, {"intermediate_size", 3072},
                     {"num_attention_heads", 12}, {"num_hidden_layers", 12}, {"image_size", 224},
                     {"patch_size", 16}, {"num_channels", 3}, {"hidden_act", "gelu"},
                     {"layer_norm_eps", 1e-12}, {"qkv_bias", true}, {"encoder_stride", 16},
                     {"initializer_range", 0.02}, {"num_labels", 1000}};
  auto deit_build = [](DeitHead h) {
    return [h](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
      TS_ASSIGN_OR_RETURN(VitConfig c, ParseVitConfig(spec.tiny_config));
      return std::unique_ptr<Model>(std::make_unique<DeitModel>(std::move(spec), std::move(c), h));
    };
  };
  out.push_back({{"DeiTModel", "deit", "image-feature-extraction"}, WithArch(deit, "DeiTModel"),
                 ScaleDeit, deit_build(DeitHead::kBase)});
  out.push_back({{"DeiTForImageClassification", "deit", "image-classification"},
                 WithArch(deit, "DeiTForImageClassification"), ScaleDeit,
                 deit_build(DeitHead::kClassifier)});
  out.push_back({{"DeiTForImageClassificationWithTeacher", "deit", "image-classification"},
                 WithArch(deit, "DeiTForImageClassificationWithTeacher"), ScaleDeit,
                 deit_build(DeitHead::kWithTeacher)});
  // ---- ResNet, modelled on microsoft/resnet-50.
  const json resnet = {{"model_type", "resnet"}, {"num_channels", 3}, {"embedding_size", 64},
                       {"hidden_sizes", {256, 512, 1024, 2048}}, {"depths", {3, 4, 6, 3}},
                       {"layer_type", "bottleneck"}, {"hidden_act", "relu"},
                       {"downsample_in_first_stage", false}, {"downsample_in_bottleneck", false},
                       {"num_labels", 1000}};
  out.push_back({{"ResNetModel", "resnet", "image-feature-extraction"}, WithArch(resnet, "ResNetModel"),
                 ScaleResNet, Builder<ResNetModel, ResNetConfig>(ParseResNet, Head::kBase)});
  out.push_back({{"ResNetForImageClassification", "resnet", "image-classification"},
                 WithArch(resnet, "ResNetForImageClassification"), ScaleResNet,
                 Builder<ResNetModel, ResNetConfig>(ParseResNet, Head::kClassifier)});
  // ---- ConvNeXt, modelled on facebook/convnext-tiny-224.
  const json convnext = {{"model_type", "convnext"}, {"num_channels", 3}, {"patch_size", 4},
                         {"num_stages", 4}, {"hidden_sizes", {96, 192, 384, 768}},
                         {"depths", {3, 3, 9, 3}}, {"hidden_act", "gelu"},
                         {"layer_norm_eps", 1e-12}, {"layer_scale_init_value", 1e-6},
                         {"drop_path_rate", 0.0}, {"image_size", 224}, {"num_labels", 1000}};
  out.push_back({{"ConvNextModel", "convnext", "image-feature-extraction"},
                 WithArch(convnext, "ConvNextModel"), ScaleConvNext,
                 Builder<ConvNextModel, ConvNextConfig>(ParseConvNext, Head::kBase)});
  out.push_back({{"ConvNextForImageClassification", "convnext", "image-classification"},
                 WithArch(convnext, "ConvNextForImageClassification"), ScaleConvNext,
                 Builder<ConvNextModel, ConvNextConfig>(ParseConvNext, Head::kClassifier)});
  // ---- MobileNetV2, modelled on google/mobilenet_v2_1.0_224.
  const json mnv2 = {{"model_type", "mobilenet_v2"}, {"num_channels", 3}, {"image_size", 224},
                     {"depth_multiplier", 1.0}, {"depth_divisible_by", 8}, {"min_depth", 8},
                     {"expand_ratio", 6.0}, {"output_stride", 32}, {"first_layer_is_expansion", true},
                     {"finegrained_output", true}, {"hidden_act", "relu6"}, {"tf_padding", true},
                     {"classifier_dropout_prob", 0.2}, {"layer_norm_eps", 0.001},
                     {"initializer_range", 0.02}, {"num_labels", 1001}};
  out.push_back({{"MobileNetV2Model", "mobilenet_v2", "image-feature-extraction"},
                 WithArch(mnv2, "MobileNetV2Model"), ScaleMobileNetV2,
                 Builder<MobileNetV2Model, MobileNetV2Config>(ParseMobileNetV2, Head::kBase)});
  out.push_back({{"MobileNetV2ForImageClassification", "mobilenet_v2", "image-classification"},
                 WithArch(mnv2, "MobileNetV2ForImageClassification"), ScaleMobileNetV2,
                 Builder<MobileNetV2Model, MobileNetV2Config>(ParseMobileNetV2, Head::kClassifier)});
  // ---- EfficientNet, modelled on google/efficientnet-b0.
  const json effnet = {{"model_type", "efficientnet"}, {"num_channels", 3}, {"image_size", 224},
                       {"width_coefficient", 1.0}, {"depth_coefficient", 1.0}, {"depth_divisor", 8},
                       {"kernel_sizes", {3, 3, 5, 3, 5, 5, 3}},
                       {"in_channels", {32, 16, 24, 40, 80, 112, 192}},
                       {"out_channels", {16, 24, 40, 80, 112, 192, 320}},
                       {"depthwise_padding", json::array()}, {"strides", {1, 2, 2, 2, 1, 2, 1}},
                       {"num_block_repeats", {1, 2, 2, 3, 3, 4, 1}},
                       {"expand_ratios", {1, 6, 6, 6, 6, 6, 6}}, {"squeeze_expansion_ratio", 0.25},
                       {"hidden_act", "swish"}, {"hidden_dim", 1280}, {"pooling_type", "mean"},
                       {"dropout_rate", 0.2}, {"batch_norm_eps", 0.001},
                       {"batch_norm_momentum", 0.99}, {"num_labels", 1000}};
  out.push_back({{"EfficientNetModel", "efficientnet", "image-feature-extraction"},
                 WithArch(effnet, "EfficientNetModel"), ScaleEfficientNet,
                 Builder<EfficientNetModel, EfficientNetConfig>(ParseEfficientNet, Head::kBase)});
  out.push_back({{"EfficientNetForImageClassification", "efficientnet", "image-classification"},
                 WithArch(effnet, "EfficientNetForImageClassification"), ScaleEfficientNet,
                 Builder<EfficientNetModel, EfficientNetConfig>(ParseEfficientNet, Head::kClassifier)});
  // ---- Swin, modelled on microsoft/swin-tiny-patch4-window7-224.
  const json swin = {{"model_type", "swin"}, {"image_size", 224}, {"patch_size", 4},
                     {"num_channels", 3}, {"embed_dim", 96}, {"depths", {2, 2, 6, 2}},
                     {"num_heads", {3, 6, 12, 24}}, {"window_size", 7}, {"mlp_ratio", 4.0},
                     {"qkv_bias", true}, {"hidden_act", "gelu"}, {"layer_norm_eps", 1e-5},
                     {"use_absolute_embeddings", false}, {"encoder_stride", 32},
                     {"drop_path_rate", 0.1}, {"initializer_range", 0.02}, {"num_labels", 1000}};
  out.push_back({{"SwinModel", "swin", "image-feature-extraction"}, WithArch(swin, "SwinModel"),
                 ScaleSwin, Builder<SwinModel, SwinConfig>(ParseSwin, Head::kBase)});
  out.push_back({{"SwinForImageClassification", "swin", "image-classification"},
                 WithArch(swin, "SwinForImageClassification"), ScaleSwin,
                 Builder<SwinModel, SwinConfig>(ParseSwin, Head::kClassifier)});
  return out;
}

}  // namespace ts::zoo::internal
