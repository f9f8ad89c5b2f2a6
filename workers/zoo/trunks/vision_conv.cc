// Conv + BatchNorm trunks (trunks/vision_conv.h).
#include "workers/zoo/trunks/vision_conv.h"

#include <algorithm>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {
namespace {

// TensorFlow "SAME" padding for a k x k conv of stride s (HF apply_tf_padding).
at::Tensor TfPad(const at::Tensor& x, int64_t k, int64_t s) {
  auto along = [&](int64_t in) {
    return in % s == 0 ? std::max<int64_t>(k - s, 0) : std::max<int64_t>(k - in % s, 0);
  };
  const int64_t ph = along(x.size(2)), pw = along(x.size(3));
  return at::constant_pad_nd(x, {pw / 2, pw - pw / 2, ph / 2, ph - ph / 2}, 0.0);
}

}  // namespace

at::Tensor BatchNorm2d(const WeightMap& w, const std::string& p, const at::Tensor& x, double eps) {
  auto v = [&](const char* n) { return GetWeight(w, p + n).view({1, -1, 1, 1}); };
  return (x - v("running_mean")) / at::sqrt(v("running_var") + eps) * v("weight") + v("bias");
}

ConvBnLayer MakeConvBn(const std::string& p, const std::string& conv_name,
                       const std::string& bn_name, int64_t in, int64_t out, int64_t k,
                       int64_t stride, int64_t groups, bool act) {
  ConvBnLayer l;
  l.conv = p + conv_name + ".weight";
  l.bn = p + bn_name + ".";
  l.in = in;
  l.out = out;
  l.k = k;
  l.stride = stride;
  l.groups = groups;
  l.act = act;
  return l;
}

ConvBnLayer MakeMobileNetConvBn(const std::string& p, int64_t in, int64_t out, int64_t k,
                                int64_t stride, int64_t groups, bool act, bool tf_padding) {
  ConvBnLayer l = MakeConvBn(p, "convolution", "normalization", in, out, k, stride, groups, act);
  if (tf_padding) l.pad = ConvBnLayer::Pad::kTfSame;
  return l;
}

ConvTrunk::ConvTrunk(ConvTrunkRecipe recipe)
    : VisionTrunk(recipe.channels, recipe.image_size), r_(std::move(recipe)) {
  for (const ConvBnLayer& l : r_.stem) AddLayer(l);
  for (const ConvBlock& b : r_.blocks) {
    if (b.shortcut) AddLayer(*b.shortcut);
    for (size_t i = 0; i < b.layers.size(); ++i) {
      if (!b.se.empty() && i + 1 == b.layers.size()) {
        const int64_t e = b.layers[i].in;
        Add(b.se + b.se_reduce + ".weight", {b.se_width, e, 1, 1});
        Add(b.se + b.se_reduce + ".bias", {b.se_width});
        Add(b.se + b.se_expand + ".weight", {e, b.se_width, 1, 1});
        Add(b.se + b.se_expand + ".bias", {e});
      }
      AddLayer(b.layers[i]);
    }
  }
  if (r_.top) AddLayer(*r_.top);
}

void ConvTrunk::AddLayer(const ConvBnLayer& l) {
  Add(l.conv, {l.out, l.in / l.groups, l.k, l.k});
  AddBn(l.bn, l.out);
}

at::Tensor ConvTrunk::Run(const WeightMap& w, const ConvBnLayer& l, at::Tensor x) const {
  int64_t padding = 0;
  if (l.pad == ConvBnLayer::Pad::kTfSame) {
    x = TfPad(x, l.k, l.stride);
  } else if (l.pad == ConvBnLayer::Pad::kExplicit) {
    x = at::constant_pad_nd(x, l.explicit_pad, 0.0);
  } else {
    padding = l.k / 2;
  }
  at::Tensor y = BatchNorm2d(
      w, l.bn, nn::Conv2d(x, GetWeight(w, l.conv), at::Tensor(), l.stride, padding, l.groups),
      r_.bn_eps);
  if (!l.act) return y;
  return Activate(y, l.own_act ? *l.own_act : r_.act);
}

at::Tensor ConvTrunk::Block(const WeightMap& w, const ConvBlock& b, const at::Tensor& x) const {
  at::Tensor res = b.shortcut ? Run(w, *b.shortcut, x) : x;
  at::Tensor y = x;
  for (size_t i = 0; i < b.layers.size(); ++i) {
    if (!b.se.empty() && i + 1 == b.layers.size()) {
      at::Tensor s = y.mean({2, 3}, /*keepdim=*/true);
      s = Activate(nn::Conv2d(s, GetWeight(w, b.se + b.se_reduce + ".weight"),
                              GetWeight(w, b.se + b.se_reduce + ".bias"), 1, 0),
                   b.se_act ? *b.se_act : r_.act);
      s = at::sigmoid(nn::Conv2d(s, GetWeight(w, b.se + b.se_expand + ".weight"),
                                 GetWeight(w, b.se + b.se_expand + ".bias"), 1, 0));
      y = y * s;
    }
    y = Run(w, b.layers[i], y);
  }
  switch (b.residual) {
    case ConvBlock::Residual::kNone:
      return y;
    case ConvBlock::Residual::kInputPlusBranch:
      return x + y;
    case ConvBlock::Residual::kBranchPlusInput:
      return y + x;
    case ConvBlock::Residual::kActOfBranchPlusInput:
      return Activate(y + res, r_.act);
  }
  return y;
}

VisionFeatures ConvTrunk::Forward(const WeightMap& w, const at::Tensor& pixel_values) const {
  at::Tensor x = pixel_values;
  for (const ConvBnLayer& l : r_.stem) x = Run(w, l, x);
  if (r_.stem_max_pool) x = at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  for (const ConvBlock& b : r_.blocks) x = Block(w, b, x);
  if (r_.top) x = Run(w, *r_.top, x);
  at::Tensor pooled = r_.pool_keepdim ? x.mean({2, 3}, /*keepdim=*/true) : x.mean({2, 3});
  return {x, pooled};
}

std::vector<int64_t> ConvTrunk::LastHiddenShape() const {
  return {r_.out_channels, r_.out_hw, r_.out_hw};
}

}  // namespace ts::zoo::internal
