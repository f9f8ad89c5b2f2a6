// What the MobileViT and MobileViTV2 trunks (families/mobilevit.cc, families/mobilevitv2.cc)
// share, as modeling_mobilevitv2.py copies it from modeling_mobilevit.py: make_divisible,
// MobileViT(V2)ConvLayer (a conv, eval BatchNorm at eps 1e-5, the config's activation) and the
// MobileNetV2 inverted residual (MobileViT(V2)InvertedResidual). Header-only: two families use it.
//
// Thread-safety: immutable after construction.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "workers/zoo/nn_convolutions.h"
#include "workers/zoo/trunks/vision.h"
#include "workers/zoo/trunks/vision_conv.h"

namespace ts::zoo::internal {

// make_divisible(value, divisor, min_value); min_value 0: the divisor.
inline int64_t MobileVitDivisible(double value, int64_t divisor = 8, int64_t min_value = 0) {
  if (min_value == 0) min_value = divisor;
  int64_t v =
      std::max<int64_t>(min_value, static_cast<int64_t>(value + static_cast<double>(divisor) / 2) /
                                       divisor * divisor);
  if (static_cast<double>(v) < 0.9 * value) v += divisor;
  return v;
}

class MobileVitConvTrunk : public VisionTrunk {
 protected:
  // `act`: hidden_act; `expand_ratio`: the inverted residuals' expansion.
  MobileVitConvTrunk(int64_t channels, int64_t image_size, VisionActivation act,
                     double expand_ratio)
      : VisionTrunk(channels, image_size), act_(act), expand_ratio_(expand_ratio) {}

  // MobileViT(V2)ConvLayer under `p`: convolution (bias when `bias`), normalization when `norm`,
  // the activation when `act`; padding (k - 1) / 2 * dilation.
  struct Conv {
    std::string p;
    int64_t k = 1, stride = 1, dilation = 1, groups = 1;
    bool norm = true, act = true, bias = false;
  };
  // expand_1x1, conv_3x3 (depthwise), reduce_1x1 (no activation); x + branch when `residual`.
  struct Inv {
    Conv expand, depthwise, reduce;
    bool residual = false;
  };

  // Lists the layer's weights and remembers it under `p` (RunConv by name).
  const Conv& ConvLayer(const std::string& p, int64_t in, int64_t out, int64_t k,
                        int64_t stride = 1, int64_t groups = 1, int64_t dilation = 1,
                        bool norm = true, bool act = true, bool bias = false) {
    Add(p + "convolution.weight", {out, in / groups, k, k});
    if (bias) Add(p + "convolution.bias", {out});
    if (norm) AddBn(p + "normalization.", out);
    return convs_[p] = Conv{p, k, stride, dilation, groups, norm, act, bias};
  }

  // Residual when stride 1 and in == out; the middle width make_divisible(round(in *
  // expand_ratio)).
  Inv MakeInverted(const std::string& p, int64_t in, int64_t out, int64_t stride,
                   int64_t dilation) {
    const int64_t mid = MobileVitDivisible(std::round(static_cast<double>(in) * expand_ratio_));
    Inv l;
    l.expand = ConvLayer(p + "expand_1x1.", in, mid, 1);
    l.depthwise = ConvLayer(p + "conv_3x3.", mid, mid, 3, stride, mid, dilation);
    l.reduce = ConvLayer(p + "reduce_1x1.", mid, out, 1, 1, 1, 1, true, false);
    l.residual = stride == 1 && in == out;
    return l;
  }

  at::Tensor RunConv(const WeightMap& w, const Conv& c, const at::Tensor& x) const {
    const int64_t pad = (c.k - 1) / 2 * c.dilation;
    at::Tensor y = nn::DilatedConv2d(x, GetWeight(w, c.p + "convolution.weight"),
                                     c.bias ? GetWeight(w, c.p + "convolution.bias") : at::Tensor(),
                                     c.stride, pad, c.dilation, c.groups);
    if (c.norm) y = BatchNorm2d(w, c.p + "normalization.", y, 1e-5);
    return c.act ? Activate(y, act_) : y;
  }
  // The layer listed under `p`.
  at::Tensor RunConv(const WeightMap& w, const std::string& p, const at::Tensor& x) const {
    return RunConv(w, convs_.at(p), x);
  }

  at::Tensor RunInverted(const WeightMap& w, const Inv& l, const at::Tensor& in) const {
    at::Tensor x = RunConv(w, l.reduce, RunConv(w, l.depthwise, RunConv(w, l.expand, in)));
    return l.residual ? in + x : x;
  }

 private:
  VisionActivation act_;
  double expand_ratio_;
  std::map<std::string, Conv> convs_;
};

}  // namespace ts::zoo::internal
