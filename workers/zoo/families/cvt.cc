// cvt (modeling_cvt.py): CvtModel (last_hidden_state, the last stage's map; its cls_token_value
// is not returned, see FIDELITY.md) and CvtForImageClassification (`cvt.`; `layernorm` over the
// last stage's cls token, or over its tokens when it has none, their mean, the classifier). Per
// stage `encoder.stages.I.`: embedding.convolution_embeddings (a padded strided conv, then a
// LayerNorm over the tokens), the stage's cls_token when cls_token[i] (of width embed_dim[-1],
// as transformers builds it), layers `layers.J.`: x + attention(layernorm_before(x)), then h +
// output.dense(gelu(intermediate.dense(layernorm_after(h)))). The attention splits off the cls
// token, projects the map through a depthwise conv and eval BatchNorm per query / key / value
// (`convolution_projection_*`, strides stride_q / stride_kv), puts the cls token back, applies
// `projection_*` and attends with scale embed_dim^-0.5 (the width, not the head size, as
// transformers scales it), then `attention.output.dense`. Only qkv_projection_method "dw_bn" is
// built. The trunk lives here: only this family uses it.
#include <algorithm>
#include <cmath>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_conv.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct CvtConfig {
  int64_t num_channels = 3, image_size = 224, num_labels = 2;
  std::vector<int64_t> patch_sizes, patch_stride, patch_padding, embed_dim, num_heads, depth;
  std::vector<int64_t> kernel_qkv, padding_q, padding_kv, stride_q, stride_kv;
  std::vector<double> mlp_ratio;
  std::vector<bool> qkv_bias, cls_token;
};

StatusOr<std::vector<bool>> CvtBoolList(const json& config, const std::string& field,
                                        std::vector<bool> def, size_t n) {
  if (!config.contains(field)) return def;
  const json& v = config[field];
  if (!v.is_array() || v.size() != n) {
    return InvalidArgumentError(field + ": expected a list of " + std::to_string(n) + " booleans");
  }
  std::vector<bool> out;
  for (const auto& b : v) {
    if (!b.is_boolean()) return InvalidArgumentError(field + ": expected booleans");
    out.push_back(b.get<bool>());
  }
  return out;
}

StatusOr<CvtConfig> ParseCvt(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  CvtConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  TS_ASSIGN_OR_RETURN(c.embed_dim, IntList(config, "embed_dim", {64, 192, 384}));
  if (c.embed_dim.empty()) return InvalidArgumentError("embed_dim: must not be empty");
  const size_t n = c.embed_dim.size();
  struct L {
    const char* name;
    std::vector<int64_t>* v;
    std::vector<int64_t> def;
    bool positive;
  };
  L lists[] = {{"patch_sizes", &c.patch_sizes, {7, 3, 3}, true},
               {"patch_stride", &c.patch_stride, {4, 2, 2}, true},
               {"patch_padding", &c.patch_padding, {2, 1, 1}, false},
               {"num_heads", &c.num_heads, {1, 3, 6}, true},
               {"depth", &c.depth, {1, 2, 10}, true},
               {"kernel_qkv", &c.kernel_qkv, {3, 3, 3}, true},
               {"padding_q", &c.padding_q, {1, 1, 1}, false},
               {"padding_kv", &c.padding_kv, {1, 1, 1}, false},
               {"stride_q", &c.stride_q, {1, 1, 1}, true},
               {"stride_kv", &c.stride_kv, {2, 2, 2}, true}};
  TS_RETURN_IF_ERROR(CheckAllPositive("embed_dim", c.embed_dim));
  for (L& l : lists) {
    TS_ASSIGN_OR_RETURN(*l.v, IntList(config, l.name, l.def));
    TS_RETURN_IF_ERROR(CheckLen(l.name, *l.v, n));
    if (l.positive) TS_RETURN_IF_ERROR(CheckAllPositive(l.name, *l.v));
    for (int64_t x : *l.v) {
      if (x < 0) return r.Error(l.name, "must be >= 0");
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (c.embed_dim[i] % c.num_heads[i] != 0) return r.Error("num_heads", "must divide embed_dim");
    if (c.stride_q[i] != 1) return r.Error("stride_q", "only 1 is supported by the zoo");
  }
  c.mlp_ratio.assign(n, 4.0);
  if (config.contains("mlp_ratio")) {
    const json& m = config["mlp_ratio"];
    if (!m.is_array() || m.size() != n) return r.Error("mlp_ratio", "expected one number a stage");
    for (size_t i = 0; i < n; ++i) {
      if (!m[i].is_number() || m[i].get<double>() <= 0)
        return r.Error("mlp_ratio", "expected positive numbers");
      c.mlp_ratio[i] = m[i].get<double>();
    }
  }
  TS_ASSIGN_OR_RETURN(c.qkv_bias, CvtBoolList(config, "qkv_bias", std::vector<bool>(n, true), n));
  std::vector<bool> cls_def(n, false);
  cls_def.back() = true;
  TS_ASSIGN_OR_RETURN(c.cls_token, CvtBoolList(config, "cls_token", cls_def, n));
  if (config.contains("qkv_projection_method")) {
    const json& q = config["qkv_projection_method"];
    if (!q.is_array()) return r.Error("qkv_projection_method", "expected a list");
    for (const auto& m : q) {
      if (m != "dw_bn") return r.Error("qkv_projection_method", "only \"dw_bn\" is supported");
    }
  }
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

class CvtTrunk : public VisionTrunk {
 public:
  CvtTrunk(CvtConfig c, std::string prefix)
      : VisionTrunk(c.num_channels, c.image_size), c_(std::move(c)), pre_(std::move(prefix)) {
    side_ = c_.image_size;
    for (size_t i = 0; i < c_.embed_dim.size(); ++i) {
      const int64_t d = c_.embed_dim[i], k = c_.patch_sizes[i];
      const int64_t in = i == 0 ? c_.num_channels : c_.embed_dim[i - 1];
      const std::string s = Stage(i);
      if (c_.cls_token[i]) Add(s + "cls_token", {1, 1, c_.embed_dim.back()});
      const std::string e = s + "embedding.convolution_embeddings.";
      Add(e + "projection.weight", {d, in, k, k});
      Add(e + "projection.bias", {d});
      Add(e + "normalization.weight", {d});
      Add(e + "normalization.bias", {d});
      side_ = (side_ + 2 * c_.patch_padding[i] - k) / c_.patch_stride[i] + 1;
      const auto inner = static_cast<int64_t>(static_cast<double>(d) * c_.mlp_ratio[i]);
      for (int64_t j = 0; j < c_.depth[i]; ++j) {
        const std::string a = s + "layers." + std::to_string(j) + ".attention.attention.";
        for (const char* m : {"query", "key", "value"}) {
          const std::string p = a + "convolution_projection_" + m + ".convolution_projection.";
          const int64_t kq = c_.kernel_qkv[i];
          Add(p + "convolution.weight", {d, 1, kq, kq});
          AddBn(p + "normalization.", d);
        }
        for (const char* m : {"query", "key", "value"}) {
          Add(a + "projection_" + m + ".weight", {d, d});
          if (c_.qkv_bias[i]) Add(a + "projection_" + m + ".bias", {d});
        }
        const std::string l = s + "layers." + std::to_string(j) + ".";
        Add(l + "attention.output.dense.weight", {d, d});
        Add(l + "attention.output.dense.bias", {d});
        Add(l + "intermediate.dense.weight", {inner, d});
        Add(l + "intermediate.dense.bias", {inner});
        Add(l + "output.dense.weight", {d, inner});
        Add(l + "output.dense.bias", {d});
        Add(l + "layernorm_before.weight", {d});
        Add(l + "layernorm_before.bias", {d});
        Add(l + "layernorm_after.weight", {d});
        Add(l + "layernorm_after.bias", {d});
      }
    }
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    auto lin = [&](const std::string& p, const at::Tensor& x) {
      const std::string b = p + ".bias";
      return nn::Linear(x, GetWeight(w, p + ".weight"), w.count(b) ? w.at(b) : at::Tensor());
    };
    auto ln = [&](const std::string& p, const at::Tensor& x) {
      return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), 1e-5);
    };
    const int64_t b = pixel_values.size(0);
    at::Tensor x = pixel_values, cls;
    for (size_t i = 0; i < c_.embed_dim.size(); ++i) {
      const int64_t d = c_.embed_dim[i], nh = c_.num_heads[i], hd = d / nh;
      const std::string s = Stage(i), e = s + "embedding.convolution_embeddings.";
      x = nn::Conv2d(x, GetWeight(w, e + "projection.weight"), GetWeight(w, e + "projection.bias"),
                     c_.patch_stride[i], c_.patch_padding[i]);
      const int64_t ht = x.size(2), wd = x.size(3), hw = ht * wd;
      x = ln(e + "normalization", x.flatten(2).transpose(1, 2));
      const bool with_cls = c_.cls_token[i];
      if (with_cls) x = at::cat({GetWeight(w, s + "cls_token").expand({b, 1, d}), x}, 1);
      for (int64_t j = 0; j < c_.depth[i]; ++j) {
        const std::string l = s + "layers." + std::to_string(j) + ".";
        const std::string a = l + "attention.attention.";
        at::Tensor y = ln(l + "layernorm_before", x);
        at::Tensor tok = with_cls ? y.narrow(1, 1, hw) : y;
        at::Tensor map = tok.transpose(1, 2).reshape({b, d, ht, wd});
        auto project = [&](const char* m, int64_t stride, int64_t pad) {
          const std::string p = a + "convolution_projection_" + m + ".convolution_projection.";
          at::Tensor t =
              nn::Conv2d(map, GetWeight(w, p + "convolution.weight"), at::Tensor(), stride, pad, d);
          t = BatchNorm2d(w, p + "normalization.", t, 1e-5).flatten(2).transpose(1, 2);
          if (with_cls) t = at::cat({y.narrow(1, 0, 1), t}, 1);
          t = lin(a + "projection_" + m, t);
          return t.view({b, t.size(1), nh, hd}).transpose(1, 2);
        };
        at::Tensor k = project("key", c_.stride_kv[i], c_.padding_kv[i]);
        at::Tensor q = project("query", c_.stride_q[i], c_.padding_q[i]);
        at::Tensor v = project("value", c_.stride_kv[i], c_.padding_kv[i]);
        at::Tensor ctx =
            nn::Attention(q, k, v, at::Tensor(), 1.0 / std::sqrt(static_cast<double>(d)));
        x = x + lin(l + "attention.output.dense", ctx.transpose(1, 2).reshape({b, -1, d}));
        at::Tensor m = nn::Activate(lin(l + "intermediate.dense", ln(l + "layernorm_after", x)),
                                    Activation::kGeluErf);
        x = x + lin(l + "output.dense", m);
      }
      if (with_cls) {
        cls = x.narrow(1, 0, 1);
        x = x.narrow(1, 1, hw);
      } else {
        cls = at::Tensor();
      }
      x = x.transpose(1, 2).reshape({b, d, ht, wd});
    }
    // CvtForImageClassification: layernorm over the cls token (or the last map's tokens), mean.
    at::Tensor pooled = cls.defined() ? cls : x.flatten(2).transpose(1, 2);
    if (classifier_norm_) pooled = ln("layernorm", pooled);
    return {x, pooled.mean(1)};
  }

  void UseClassifierNorm() {
    classifier_norm_ = true;
    Add("layernorm.weight", {c_.embed_dim.back()});
    Add("layernorm.bias", {c_.embed_dim.back()});
  }
  std::vector<int64_t> LastHiddenShape() const override {
    return {c_.embed_dim.back(), side_, side_};
  }
  int64_t PooledWidth() const override { return c_.embed_dim.back(); }

 private:
  std::string Stage(size_t i) const { return pre_ + "encoder.stages." + std::to_string(i) + "."; }

  CvtConfig c_;
  std::string pre_;
  int64_t side_ = 0;
  bool classifier_norm_ = false;
};

StatusOr<json> ScaleCvt(const json& config) {
  TS_ASSIGN_OR_RETURN(CvtConfig c, ParseCvt(config));
  json t = config;
  // 16 channels per head (cvt-13's heads 1, 3, 6 give 16, 48, 96), one layer per stage; 32
  // pixels give 8, 4, 2 per side with cvt's patch strides 4, 2, 2.
  std::vector<int64_t> dims, depth;
  for (int64_t h : c.num_heads) dims.push_back(16 * h);
  for (int64_t d : c.depth) depth.push_back(std::min<int64_t>(d, 1));
  t["embed_dim"] = dims;
  t["depth"] = depth;
  t["image_size"] = TinyProfile::kImageSize;
  TS_RETURN_IF_ERROR(ParseCvt(t).status());
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  return t;
}

StatusOr<std::unique_ptr<Model>> BuildCvt(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(CvtConfig c, ParseCvt(spec.tiny_config));
  const VisionHeadKind kind = VisionHeadKindOf(spec.arch);
  const bool classifier = kind == VisionHeadKind::kClassification;
  const int64_t labels = c.num_labels;
  auto trunk = std::make_unique<CvtTrunk>(std::move(c), classifier ? "cvt." : "");
  if (classifier) trunk->UseClassifierNorm();
  auto head = VisionHeadFor(kind, *trunk, labels);
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

std::vector<ArchEntry> CvtArchs() {
  // microsoft/cvt-13.
  const json example = {{"model_type", "cvt"},
                        {"num_channels", 3},
                        {"patch_sizes", {7, 3, 3}},
                        {"patch_stride", {4, 2, 2}},
                        {"patch_padding", {2, 1, 1}},
                        {"embed_dim", {64, 192, 384}},
                        {"num_heads", {1, 3, 6}},
                        {"depth", {1, 2, 10}},
                        {"mlp_ratio", {4.0, 4.0, 4.0}},
                        {"attention_drop_rate", {0.0, 0.0, 0.0}},
                        {"drop_rate", {0.0, 0.0, 0.0}},
                        {"drop_path_rate", {0.0, 0.0, 0.1}},
                        {"qkv_bias", {true, true, true}},
                        {"cls_token", {false, false, true}},
                        {"qkv_projection_method", {"dw_bn", "dw_bn", "dw_bn"}},
                        {"kernel_qkv", {3, 3, 3}},
                        {"padding_kv", {1, 1, 1}},
                        {"stride_kv", {2, 2, 2}},
                        {"padding_q", {1, 1, 1}},
                        {"stride_q", {1, 1, 1}},
                        {"initializer_range", 0.02},
                        {"layer_norm_eps", 1e-12},
                        {"num_labels", 1000}};
  json base = WithArchitecture(example, "CvtModel");
  base.erase("num_labels");
  return {{{"CvtForImageClassification", "cvt", "image-classification"},
           WithArchitecture(example, "CvtForImageClassification"),
           ScaleCvt,
           BuildCvt},
          {{"CvtModel", "cvt", "feature-extraction"}, base, ScaleCvt, BuildCvt}};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Cvt, CvtArchs);

}  // namespace ts::zoo::internal
