// The vision kind: a trunk turns pixel_values into features, an image head (heads/image_head.h)
// turns the features into outputs, a loss and labels. VisionModel joins the two.
//
// Trunks (each driven by a recipe a family file fills from its config):
//   trunks/vision_transformer.h  ViT-style patch-token encoders (vit, deit)
//   trunks/vision_conv.h         conv + BatchNorm stacks (resnet, mobilenet_v2, efficientnet)
//   trunks/vision_convnext.h     ConvNeXt stages
//   trunks/vision_swin.h         Swin shifted-window stages
//   trunks/vision_segformer.h    SegFormer's Mix Transformer stages (segformer, glpn)
//   trunks/vision_dinov3.h       DINOv3 ViT with the 2D rotary over the patch tokens (dinov3_vit)
//   trunks/vision_video.h        video tubelets and frames (videomae, vivit, timesformer)
//
// Thread-safety: trunks and models are immutable after construction.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/model.h"

namespace ts::zoo::internal {

using WeightList = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// hidden_act of the conv families: relu6 (MobileNetV2) or an nn activation.
struct VisionActivation {
  bool relu6 = false;
  Activation act = Activation::kGeluErf;
};
at::Tensor Activate(const at::Tensor& x, const VisionActivation& a);

// What a trunk hands its head.
struct VisionFeatures {
  at::Tensor last_hidden_state;  // [B, N, C] tokens or [B, C, H, W] maps
  at::Tensor pooled;             // token 0 [B, C], or the pooled map ([B, C] or [B, C, 1, 1])
  // Every stage's map [B, C_i, H_i, W_i] of a hierarchical trunk (SegFormer), for the decode
  // heads; empty for the others.
  std::vector<at::Tensor> stages = {};
};

// Base of every vision trunk: owns its weight list (in init order, which the RNG follows) and
// the names of its BatchNorm scales.
class VisionTrunk {
 public:
  virtual ~VisionTrunk() = default;

  const WeightList& Weights() const { return weights_; }
  const std::set<std::string>& BatchNormWeights() const { return bn_weights_; }
  int64_t channels() const { return channels_; }
  int64_t image_size() const { return image_size_; }

  virtual VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const = 0;
  // The forward under bool_masked_pos [B, patches] of a trunk that reads it: the masked patch
  // embeddings replaced by the mask token (use_mask_token: the *ForMaskedImageModeling classes)
  // or dropped (VideoMAEForPreTraining's encoder). The other trunks throw c10::Error.
  virtual VisionFeatures ForwardMasked(const WeightMap& w, const at::Tensor& pixel_values,
                                       const at::Tensor& bool_masked_pos) const;
  // Shape of the batch's pixel_values without the batch dimension: [C, H, W] (video trunks:
  // [frames, C, H, W]).
  virtual std::vector<int64_t> PixelValuesShape() const {
    return {channels_, image_size_, image_size_};
  }
  // Shape of last_hidden_state without the batch dimension.
  virtual std::vector<int64_t> LastHiddenShape() const = 0;
  // Width of `pooled` (the classifier's input features).
  virtual int64_t PooledWidth() const = 0;
  // Initializes `t` if the trunk has its own rule for weight `name`; false leaves it to the
  // model's policy.
  virtual bool InitWeight(const std::string& /*name*/, at::Tensor& /*t*/,
                          at::Generator& /*gen*/) const {
    return false;
  }

 protected:
  VisionTrunk(int64_t channels, int64_t image_size)
      : channels_(channels), image_size_(image_size) {}

  std::string Add(const std::string& name, std::vector<int64_t> shape) {
    weights_.emplace_back(name, std::move(shape));
    return name;
  }
  // BatchNorm parameters and running stats under `p` ("...normalization.").
  void AddBn(const std::string& p, int64_t c) {
    bn_weights_.insert(Add(p + "weight", {c}));
    Add(p + "bias", {c});
    Add(p + "running_mean", {c});
    Add(p + "running_var", {c});
  }

 private:
  int64_t channels_, image_size_;
  WeightList weights_;
  std::set<std::string> bn_weights_;
};

class ImageHead;

// A trunk and an image head: weights are the trunk's then the head's; the batch is
// pixel_values [B, C, H, W] (seeded randn) then the head's labels.
class VisionModel final : public Model {
 public:
  VisionModel(ModelSpec spec, std::unique_ptr<VisionTrunk> trunk, std::unique_ptr<ImageHead> head);
  ~VisionModel() override;

  WeightList WeightShapes() const override;
  std::vector<std::string> OutputNames() const override;
  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override;
  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override;
  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override;

  const VisionTrunk& trunk() const { return *trunk_; }

 protected:
  // BatchNorm: running_var U(0.5, 1.5), running_mean N(0, 0.1), scale 1; ConvNeXt
  // layer_scale_parameter U(0.5, 1.5); the rest as Model.
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override;

 private:
  std::unique_ptr<VisionTrunk> trunk_;
  std::unique_ptr<ImageHead> head_;
};

// What a pooled-map family (resnet, convnext, mobilenet_v2, efficientnet, swin) builds from a
// tiny config: its trunk, with weight names under `prefix`, and the classifier's label count.
struct PooledVisionTrunk {
  std::unique_ptr<VisionTrunk> trunk;
  int64_t num_labels = 2;
};
using MakePooledVisionTrunk = std::function<StatusOr<PooledVisionTrunk>(
    const nlohmann::json& tiny_config, const std::string& prefix)>;

// The names of a pooled-map family: classes `<name>Model` (weights unprefixed) and
// `<name>ForImageClassification` (weights under `prefix`, classifier under `classifier`).
struct PooledVisionFamily {
  std::string name;        // "ResNet"
  std::string model_type;  // "resnet"
  std::string prefix;      // "resnet."
  std::string classifier = "classifier.";
};

// The family's two classes: example = `example` with its architectures set, heads from
// heads/image_head.h's PooledImageHead.
std::vector<ArchEntry> PooledVisionArchs(const PooledVisionFamily& family,
                                         const nlohmann::json& example,
                                         decltype(ArchEntry::scale) scale,
                                         MakePooledVisionTrunk make_trunk);

// A VisionModel as a family's build function returns it.
StatusOr<std::unique_ptr<Model>> MakeVisionModel(ModelSpec spec, std::unique_ptr<VisionTrunk> trunk,
                                                 std::unique_ptr<ImageHead> head);

}  // namespace ts::zoo::internal
