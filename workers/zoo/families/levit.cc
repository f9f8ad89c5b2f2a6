// levit (modeling_levit.py, configuration_levit.py): LevitModel (last_hidden_state: the last
// stage's tokens [B, N, C]; pooler_output their mean), LevitForImageClassification (classifier:
// LevitClassificationLayer, a BatchNorm1d then a Linear, over the token mean) and
// LevitForImageClassificationWithTeacher (classifier and classifier_distill, logits their mean;
// transformers gives it no loss, the zoo trains it as DeiT's teacher class: cross entropy on
// logits). The trunk lives here (no other family uses it): LevitPatchEmbeddings (four
// conv + BatchNorm2d layers, hardswish between them, flattened to tokens), stages of residual
// LevitAttention (queries_keys_values and projection are MLPLayerWithBN: a bias-free Linear
// then a BatchNorm1d over batch x tokens, as transformers builds them unfused; attention scores
// plus attention_biases[:, attention_bias_idxs], the index built from the offsets between the
// grid points in transformers' first-seen order; hardswish before the projection) and residual
// LevitMLPLayer (linear_up, hardswish, linear_down), then LevitAttentionSubsample (keys_values
// over every token, queries over the stride-2 subsampled grid, key_dim[0], hidden_sizes[i] //
// key_dim[0] heads, attention ratio 4) and its MLP (ratio 2), as LevitConfig.down_ops fixes
// them. Every BatchNorm runs in eval mode (eps 1e-5). attention_bias_idxs is a non-persistent
// buffer in transformers (not in the state_dict); the zoo keeps it as a constant index.
//
// Refused, naming the field: depths other than 3 stages (down_ops has two subsamples), per-stage
// lists of other lengths, a stem that does not map image_size to image_size // patch_size.
#include <algorithm>
#include <cmath>
#include <map>
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

struct LevitConfig {
  int64_t num_channels = 3, image_size = 224, kernel = 3, stride = 2, padding = 1, patch = 16;
  std::vector<int64_t> hidden, heads, depths, key_dim, mlp_ratio, attn_ratio;
  double init_range = 0.02;
  int64_t num_labels = 2;
};

StatusOr<LevitConfig> ParseLevit(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  LevitConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.kernel, PositiveInt(r, "kernel_size", 3));
  TS_ASSIGN_OR_RETURN(c.stride, PositiveInt(r, "stride", 2));
  TS_ASSIGN_OR_RETURN(c.padding, r.Int("padding", 1));
  if (c.padding < 0) return r.Error("padding", "must not be negative");
  TS_ASSIGN_OR_RETURN(c.patch, PositiveInt(r, "patch_size", 16));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {4, 4, 4}));
  if (c.depths.size() != 3)
    return r.Error("depths",
                   "LeViT's down_ops fix 3 stages, got " + std::to_string(c.depths.size()));
  TS_ASSIGN_OR_RETURN(c.hidden, IntList(config, "hidden_sizes", {128, 256, 384}));
  TS_ASSIGN_OR_RETURN(c.heads, IntList(config, "num_attention_heads", {4, 8, 12}));
  TS_ASSIGN_OR_RETURN(c.key_dim, IntList(config, "key_dim", {16, 16, 16}));
  TS_ASSIGN_OR_RETURN(c.mlp_ratio, IntList(config, "mlp_ratio", {2, 2, 2}));
  TS_ASSIGN_OR_RETURN(c.attn_ratio, IntList(config, "attention_ratio", {2, 2, 2}));
  for (const auto& [f, v] : std::vector<std::pair<const char*, const std::vector<int64_t>*>>{
           {"hidden_sizes", &c.hidden},
           {"num_attention_heads", &c.heads},
           {"key_dim", &c.key_dim},
           {"mlp_ratio", &c.mlp_ratio},
           {"attention_ratio", &c.attn_ratio}}) {
    TS_RETURN_IF_ERROR(CheckLen(f, *v, 3));
  }
  TS_RETURN_IF_ERROR(CheckAllPositive("depths", c.depths));
  TS_RETURN_IF_ERROR(CheckAllPositive("hidden_sizes", c.hidden));
  TS_RETURN_IF_ERROR(CheckAllPositive("num_attention_heads", c.heads));
  TS_RETURN_IF_ERROR(CheckAllPositive("key_dim", c.key_dim));
  TS_RETURN_IF_ERROR(CheckAllPositive("attention_ratio", c.attn_ratio));
  for (int64_t m : c.mlp_ratio)
    if (m < 0) return r.Error("mlp_ratio", "must not be negative");
  if (c.hidden[0] % 8 != 0) return r.Error("hidden_sizes", "hidden_sizes[0] must divide by 8");
  // The subsamples' heads: hidden_sizes[i] // key_dim[0].
  for (int i = 0; i < 2; ++i)
    if (c.hidden[i] < c.key_dim[0])
      return r.Error("hidden_sizes", "hidden_sizes[" + std::to_string(i) + "] below key_dim[0]");
  int64_t side = c.image_size;
  for (int i = 0; i < 4; ++i) side = (side + 2 * c.padding - c.kernel) / c.stride + 1;
  if (side != c.image_size / c.patch)
    return r.Error("patch_size", "the four stem convs map image_size " +
                                     std::to_string(c.image_size) + " to " + std::to_string(side) +
                                     ", not image_size // patch_size");
  TS_ASSIGN_OR_RETURN(c.init_range, r.Double("initializer_range", 0.02));
  if (!(c.init_range > 0)) return r.Error("initializer_range", "must be positive");
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

// Widths with the last 64 (ratios kept, multiples of 16), key_dim 8, at most 2 heads, one
// attention + MLP pair per stage, the image 4 patches a side (4 x 4, 2 x 2, 1 x 1 token grids).
StatusOr<json> ScaleLevit(const json& config) {
  TS_ASSIGN_OR_RETURN(LevitConfig c, ParseLevit(config));
  json t = config;
  std::vector<int64_t> hidden, heads, depths, key_dim;
  for (size_t i = 0; i < 3; ++i) {
    hidden.push_back(
        std::max<int64_t>(16, ScaleRatio(c.hidden[i], c.hidden.back(), 64, 16) / 16 * 16));
    heads.push_back(std::min<int64_t>(c.heads[i], 2));
    depths.push_back(1);
    key_dim.push_back(8);
  }
  t["hidden_sizes"] = hidden;
  t["num_attention_heads"] = heads;
  t["depths"] = depths;
  t["key_dim"] = key_dim;
  t["image_size"] = 4 * c.patch;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  TS_RETURN_IF_ERROR(ParseLevit(t).status());
  return t;
}

// attention_bias_idxs of LevitAttention (stride 1, queries = keys grid) and
// LevitAttentionSubsample (queries on the subsampled grid): each (|dy|, |dx|) offset numbered in
// the order it is first met, row-major over (query point, key point). Returns the index
// [queries * keys] and the number of offsets.
std::pair<std::vector<int64_t>, int64_t> BiasIndex(int64_t res_in, int64_t res_out,
                                                   int64_t stride) {
  std::map<std::pair<int64_t, int64_t>, int64_t> offsets;
  std::vector<int64_t> idx;
  for (int64_t qy = 0; qy < res_out; ++qy)
    for (int64_t qx = 0; qx < res_out; ++qx)
      for (int64_t ky = 0; ky < res_in; ++ky)
        for (int64_t kx = 0; kx < res_in; ++kx) {
          const std::pair<int64_t, int64_t> o{std::abs(qy * stride - ky),
                                              std::abs(qx * stride - kx)};
          auto it = offsets.find(o);
          if (it == offsets.end()) it = offsets.emplace(o, offsets.size()).first;
          idx.push_back(it->second);
        }
  return {idx, static_cast<int64_t>(offsets.size())};
}

class LevitTrunk : public VisionTrunk {
 public:
  LevitTrunk(LevitConfig c, std::string prefix)
      : VisionTrunk(c.num_channels, c.image_size), c_(std::move(c)), p_(std::move(prefix)) {
    const int64_t h0 = c_.hidden[0];
    const std::vector<int64_t> stem = {c_.num_channels, h0 / 8, h0 / 4, h0 / 2, h0};
    for (int i = 1; i <= 4; ++i) {
      const std::string e = p_ + "patch_embeddings.embedding_layer_" + std::to_string(i) + ".";
      linears_.insert(Add(e + "convolution.weight", {stem[i], stem[i - 1], c_.kernel, c_.kernel}));
      AddBn(e + "batch_norm.", stem[i]);
    }
    int64_t res = c_.image_size / c_.patch;
    for (int s = 0; s < 3; ++s) {
      const std::string sp = p_ + "encoder.stages." + std::to_string(s) + ".layers.";
      int64_t li = 0;
      const int64_t dim = c_.hidden[s];
      for (int64_t d = 0; d < c_.depths[s]; ++d) {
        Layer a{Layer::kAttention, sp + std::to_string(li++) + ".module."};
        a.heads = c_.heads[s];
        a.key_dim = c_.key_dim[s];
        a.ratio = c_.attn_ratio[s];
        a.res_in = a.res_out = res;
        a.stride = 1;
        const int64_t vdim = a.ratio * a.key_dim * a.heads;
        LinearBn(a.p + "queries_keys_values.", dim, vdim + 2 * a.key_dim * a.heads);
        LinearBn(a.p + "projection.", vdim, dim);
        AddBiases(a);
        layers_.push_back(a);
        if (c_.mlp_ratio[s] > 0)
          AddMlp(sp + std::to_string(li++) + ".module.", dim, c_.mlp_ratio[s]);
      }
      if (s == 2) break;
      // down_ops[s] = ["Subsample", key_dim[0], hidden_sizes[s] // key_dim[0], 4, 2, 2].
      Layer sub{Layer::kSubsample, sp + std::to_string(li++) + "."};
      sub.key_dim = c_.key_dim[0];
      sub.heads = dim / sub.key_dim;
      sub.ratio = 4;
      sub.stride = 2;
      sub.res_in = res;
      sub.res_out = (res - 1) / 2 + 1;
      const int64_t vdim = sub.ratio * sub.key_dim * sub.heads;
      LinearBn(sub.p + "keys_values.", dim, vdim + sub.key_dim * sub.heads);
      LinearBn(sub.p + "queries.", dim, sub.key_dim * sub.heads);
      LinearBn(sub.p + "projection.", vdim, c_.hidden[s + 1]);
      AddBiases(sub);
      layers_.push_back(sub);
      res = sub.res_out;
      AddMlp(sp + std::to_string(li++) + ".module.", c_.hidden[s + 1], 2);
    }
    res_ = res;
  }

  // transformers' _init_weights: Linear and Conv2d weights N(0, initializer_range) (the zoo's
  // fan-in std is not LeViT's); attention_biases N(0, 0.5) instead of zeros, so that a wrong
  // bias index shows.
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (biases_.count(name)) {
      t.normal_(0.0, 0.5, gen);
      return true;
    }
    if (!linears_.count(name)) return false;
    t.normal_(0.0, c_.init_range, gen);
    return true;
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    at::Tensor x = pixel_values;
    for (int i = 1; i <= 4; ++i) {
      const std::string e = p_ + "patch_embeddings.embedding_layer_" + std::to_string(i) + ".";
      x = nn::Conv2d(x, GetWeight(w, e + "convolution.weight"), at::Tensor(), c_.stride,
                     c_.padding);
      x = BatchNorm2d(w, e + "batch_norm.", x, kBnEps);
      if (i < 4) x = Hardswish(x);
    }
    x = x.flatten(2).transpose(1, 2);
    for (const Layer& l : layers_) {
      switch (l.kind) {
        case Layer::kAttention:
          x = x + Attention(w, l, x);
          break;
        case Layer::kSubsample:
          x = Attention(w, l, x);
          break;
        case Layer::kMlp:
          x = x + LinearBnRun(w, l.p + "linear_down.",
                              Hardswish(LinearBnRun(w, l.p + "linear_up.", x)));
          break;
      }
    }
    return {x, x.mean({1})};
  }

  std::vector<int64_t> LastHiddenShape() const override { return {res_ * res_, c_.hidden.back()}; }
  int64_t PooledWidth() const override { return c_.hidden.back(); }

 private:
  static constexpr double kBnEps = 1e-5;

  struct Layer {
    enum Kind { kAttention, kSubsample, kMlp } kind;
    std::string p;
    int64_t heads = 0, key_dim = 0, ratio = 0, stride = 1, res_in = 0, res_out = 0;
    at::Tensor index = {};  // attention_bias_idxs, flattened, int64 on the CPU
  };

  // MLPLayerWithBN: `linear` (no bias) and `batch_norm` (BatchNorm1d).
  void LinearBn(const std::string& p, int64_t in, int64_t out) {
    linears_.insert(Add(p + "linear.weight", {out, in}));
    AddBn(p + "batch_norm.", out);
  }
  void AddMlp(const std::string& p, int64_t dim, int64_t ratio) {
    LinearBn(p + "linear_up.", dim, dim * ratio);
    LinearBn(p + "linear_down.", dim * ratio, dim);
    layers_.push_back({Layer::kMlp, p});
  }
  void AddBiases(Layer& l) {
    auto [idx, n] = BiasIndex(l.res_in, l.res_out, l.stride);
    l.index = at::tensor(idx, at::TensorOptions().dtype(at::kLong));
    biases_.insert(Add(l.p + "attention_biases", {l.heads, n}));
  }

  static at::Tensor Hardswish(const at::Tensor& x) { return x * (x + 3).clamp(0, 6) / 6; }

  // MLPLayerWithBN over [B, N, C]: the eval BatchNorm1d per channel (the last dim).
  static at::Tensor LinearBnRun(const WeightMap& w, const std::string& p, const at::Tensor& x) {
    at::Tensor y = nn::Linear(x, GetWeight(w, p + "linear.weight"), at::Tensor());
    const std::string b = p + "batch_norm.";
    return (y - GetWeight(w, b + "running_mean")) /
               at::sqrt(GetWeight(w, b + "running_var") + kBnEps) * GetWeight(w, b + "weight") +
           GetWeight(w, b + "bias");
  }

  // LevitAttention / LevitAttentionSubsample.
  at::Tensor Attention(const WeightMap& w, const Layer& l, const at::Tensor& x) const {
    const int64_t bs = x.size(0), n = x.size(1), nq = l.res_out * l.res_out;
    at::Tensor q, k, v;
    if (l.kind == Layer::kAttention) {
      auto parts = LinearBnRun(w, l.p + "queries_keys_values.", x)
                       .view({bs, n, l.heads, -1})
                       .split_with_sizes({l.key_dim, l.key_dim, l.ratio * l.key_dim}, 3);
      q = parts[0];
      k = parts[1];
      v = parts[2];
    } else {
      auto parts = LinearBnRun(w, l.p + "keys_values.", x)
                       .view({bs, n, l.heads, -1})
                       .split_with_sizes({l.key_dim, l.ratio * l.key_dim}, 3);
      k = parts[0];
      v = parts[1];
      // LevitSubsample: the [res, res] grid's every stride-th row and column.
      at::Tensor sub = x.view({bs, l.res_in, l.res_in, x.size(2)})
                           .slice(1, 0, l.res_in, l.stride)
                           .slice(2, 0, l.res_in, l.stride)
                           .reshape({bs, -1, x.size(2)});
      q = LinearBnRun(w, l.p + "queries.", sub).view({bs, nq, l.heads, l.key_dim});
    }
    q = q.permute({0, 2, 1, 3});
    k = k.permute({0, 2, 1, 3});
    v = v.permute({0, 2, 1, 3});
    // attention_biases[:, idxs] as index_select (the simulated device's CPU fallback does not
    // move aten::index's index list).
    at::Tensor bias = GetWeight(w, l.p + "attention_biases")
                          .index_select(1, l.index.to(x.device()))
                          .view({l.heads, nq, n});
    const double scale = 1.0 / std::sqrt(static_cast<double>(l.key_dim));
    at::Tensor scores = at::softmax(nn::Matmul(q, k.transpose(-2, -1)) * scale + bias, -1);
    at::Tensor out = nn::Matmul(scores, v).transpose(1, 2).reshape({bs, nq, -1});
    return LinearBnRun(w, l.p + "projection.", Hardswish(out));
  }

  LevitConfig c_;
  std::string p_;
  std::vector<Layer> layers_;
  std::set<std::string> linears_, biases_;
  int64_t res_ = 1;
};

// LevitForImageClassification(WithTeacher)'s head over the token mean: LevitClassificationLayer
// (BatchNorm1d, Linear) under classifier. (and classifier_distill.); loss as
// ImageClassificationHead on logits.
class LevitHead : public ImageHead {
 public:
  LevitHead(int64_t width, int64_t num_labels, bool teacher, double init_range)
      : classifier_(ImageClassificationHead(
            {.prefix = "classifier.", .num_labels = num_labels, .width = width, .flatten = false})),
        teacher_(teacher),
        init_range_(init_range) {
    for (const char* h : teacher ? std::vector<const char*>{"classifier.", "classifier_distill."}
                                 : std::vector<const char*>{"classifier."}) {
      for (const char* s : {"weight", "bias", "running_mean", "running_var"})
        Add(std::string(h) + "batch_norm." + s, {width});
      Add(std::string(h) + "linear.weight", {num_labels, width});
      Add(std::string(h) + "linear.bias", {num_labels});
    }
  }

  std::vector<std::string> OutputNames() const override {
    if (teacher_) return {"logits", "cls_logits", "distillation_logits"};
    return {"logits"};
  }

  // BatchNorm scales 1; linear weights N(0, initializer_range) as the trunk's.
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (EndsWith(name, "batch_norm.weight")) {
      t.fill_(1.0);
      return true;
    }
    if (!EndsWith(name, "linear.weight")) return false;
    t.normal_(0.0, init_range_, gen);
    return true;
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const VisionFeatures& f) const override {
    at::Tensor cls = Layer(w, "classifier.", f.pooled);
    if (!teacher_) return {cls};
    at::Tensor dist = Layer(w, "classifier_distill.", f.pooled);
    return {(cls + dist) / 2, cls, dist};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    return classifier_->Loss({out[0]}, labels);
  }
  void AddLabels(at::Generator& gen, int64_t batch_size, TensorMap& labels) const override {
    classifier_->AddLabels(gen, batch_size, labels);
  }

 private:
  static bool EndsWith(const std::string& s, const std::string& e) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  }
  static at::Tensor Layer(const WeightMap& w, const std::string& p, const at::Tensor& x) {
    const std::string b = p + "batch_norm.";
    at::Tensor y = (x - GetWeight(w, b + "running_mean")) /
                       at::sqrt(GetWeight(w, b + "running_var") + 1e-5) *
                       GetWeight(w, b + "weight") +
                   GetWeight(w, b + "bias");
    return nn::Linear(y, GetWeight(w, p + "linear.weight"), GetWeight(w, p + "linear.bias"));
  }

  std::unique_ptr<ImageHead> classifier_;  // its loss and labels only
  bool teacher_;
  double init_range_;
};

enum class LevitClass { kModel, kClassifier, kTeacher };

decltype(ArchEntry::build) BuildLevit(LevitClass kind) {
  return [kind](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(LevitConfig c, ParseLevit(spec.tiny_config));
    const bool base = kind == LevitClass::kModel;
    auto trunk = std::make_unique<LevitTrunk>(c, base ? "" : "levit.");
    std::unique_ptr<ImageHead> h;
    if (base) {
      h = ImageFeaturesHead({.tanh_pooler = false,
                             .width = trunk->PooledWidth(),
                             .loss = FeatureLoss::kTargetAndZeroPooled,
                             .last_hidden_shape = trunk->LastHiddenShape()});
    } else {
      h = std::make_unique<LevitHead>(c.hidden.back(), c.num_labels, kind == LevitClass::kTeacher,
                                      c.init_range);
    }
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(h));
  };
}

std::vector<ArchEntry> LevitArchs() {
  // facebook/levit-128S.
  const json example = {{"model_type", "levit"},
                        {"image_size", 224},
                        {"num_channels", 3},
                        {"kernel_size", 3},
                        {"stride", 2},
                        {"padding", 1},
                        {"patch_size", 16},
                        {"hidden_sizes", {128, 256, 384}},
                        {"num_attention_heads", {4, 6, 8}},
                        {"depths", {2, 3, 4}},
                        {"key_dim", {16, 16, 16}},
                        {"drop_path_rate", 0},
                        {"mlp_ratio", {2, 2, 2}},
                        {"attention_ratio", {2, 2, 2}},
                        {"initializer_range", 0.02},
                        {"num_labels", 1000}};
  json base = example;
  base.erase("num_labels");
  return {{{"LevitModel", "levit", "image-feature-extraction"},
           WithArchitecture(base, "LevitModel"),
           ScaleLevit,
           BuildLevit(LevitClass::kModel)},
          {{"LevitForImageClassification", "levit", "image-classification"},
           WithArchitecture(example, "LevitForImageClassification"),
           ScaleLevit,
           BuildLevit(LevitClass::kClassifier)},
          {{"LevitForImageClassificationWithTeacher", "levit", "image-classification"},
           WithArchitecture(example, "LevitForImageClassificationWithTeacher"),
           ScaleLevit,
           BuildLevit(LevitClass::kTeacher)}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Levit, LevitArchs);

}  // namespace ts::zoo::internal
