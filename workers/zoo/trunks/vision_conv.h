// Conv + BatchNorm trunks (resnet, regnet, mobilenet_v2, efficientnet): a stem, residual blocks of
// conv-BN(-act) layers with an optional projection shortcut and squeeze-excite, an optional top
// layer, global average pooling. The family files fill the recipe from their configs.
// BatchNorm runs in eval mode (running stats are weights).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "workers/zoo/trunks/vision.h"

namespace ts::zoo::internal {

// conv (no bias) + eval BatchNorm + optional activation.
struct ConvBnLayer {
  std::string conv;  // the conv weight [out, in / groups, k, k]
  std::string bn;    // BatchNorm prefix ("...normalization.")
  int64_t in = 0, out = 0, k = 1, stride = 1, groups = 1;
  bool act = true;
  // The layer's own activation when it is not the recipe's (ResNet's inner convs: relu).
  std::optional<VisionActivation> own_act;
  // Padding: symmetric k / 2, TensorFlow "same" (MobileNetV2 tf_padding), or explicit
  // {left, right, top, bottom} zeros before an unpadded conv.
  enum class Pad { kHalf, kTfSame, kExplicit } pad = Pad::kHalf;
  std::vector<int64_t> explicit_pad;
};

// Conv `p + conv_name + ".weight"`, BatchNorm under `p + bn_name + "."`.
ConvBnLayer MakeConvBn(const std::string& p, const std::string& conv_name,
                       const std::string& bn_name, int64_t in, int64_t out, int64_t k,
                       int64_t stride, int64_t groups, bool act);
// MobileNet V1 / V2's layer (MobileNetV*ConvLayer): `convolution` + `normalization` under `p`,
// TensorFlow "same" padding when the config's tf_padding is set.
ConvBnLayer MakeMobileNetConvBn(const std::string& p, int64_t in, int64_t out, int64_t k,
                                int64_t stride, int64_t groups, bool act, bool tf_padding);

struct ConvBlock {
  std::optional<ConvBnLayer> shortcut;  // ResNet projection of the block input
  std::vector<ConvBnLayer> layers;
  // EfficientNet squeeze-excite before the last layer: `se` prefix ("" = none), its width.
  std::string se;
  int64_t se_width = 0;
  // The squeeze-excite convs' names under `se` and its inner activation (EfficientNet: reduce /
  // expand, the recipe's act; RegNet's RegNetSELayer: attention.1 / attention.3, ReLU).
  std::string se_reduce = "reduce", se_expand = "expand";
  std::optional<VisionActivation> se_act;
  enum class Residual {
    kNone,
    kInputPlusBranch,       // x + y (MobileNetV2)
    kBranchPlusInput,       // y + x (EfficientNet)
    kActOfBranchPlusInput,  // act(y + shortcut(x)) (ResNet; always residual)
  } residual = Residual::kNone;
};

struct ConvTrunkRecipe {
  int64_t channels = 3, image_size = 224;
  std::vector<ConvBnLayer> stem;
  bool stem_max_pool = false;  // ResNet: 3x3 / 2 max pool after the stem
  std::vector<ConvBlock> blocks;
  std::optional<ConvBnLayer> top;
  VisionActivation act;
  double bn_eps = 1e-5;
  bool pool_keepdim = false;             // ResNet's pooler_output stays [B, C, 1, 1]
  int64_t out_channels = 0, out_hw = 1;  // last_hidden_state [B, out_channels, out_hw, out_hw]
};

class ConvTrunk : public VisionTrunk {
 public:
  explicit ConvTrunk(ConvTrunkRecipe recipe);

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override;
  std::vector<int64_t> LastHiddenShape() const override;
  int64_t PooledWidth() const override { return r_.out_channels; }
  const ConvTrunkRecipe& recipe() const { return r_; }

 private:
  void AddLayer(const ConvBnLayer& l);
  at::Tensor Run(const WeightMap& w, const ConvBnLayer& l, at::Tensor x) const;
  at::Tensor Block(const WeightMap& w, const ConvBlock& b, const at::Tensor& x) const;

  ConvTrunkRecipe r_;
};

// Eval-mode BatchNorm over NCHW with the weights under `p`.
at::Tensor BatchNorm2d(const WeightMap& w, const std::string& p, const at::Tensor& x, double eps);

}  // namespace ts::zoo::internal
