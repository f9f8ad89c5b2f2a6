// Image heads over a vision trunk's features (trunks/vision.h): their weights, output names,
// loss and labels. Each family picks one per class:
//   heads/image_classification.cc  *ForImageClassification (and DeiT's distilled teacher head)
//   heads/image_features.cc        the base *Model: last_hidden_state and pooler_output
//   heads/semantic_segmentation.cc SegFormer's all-MLP decode head
//   heads/depth_estimation.cc      GLPN's decoder and depth head
//
// Thread-safety: immutable after construction.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workers/zoo/trunks/vision.h"

namespace ts::zoo::internal {

class ImageHead {
 public:
  virtual ~ImageHead() = default;

  // The head's weights, in init order (after the trunk's).
  const WeightList& Weights() const { return weights_; }
  virtual std::vector<std::string> OutputNames() const = 0;
  virtual std::vector<at::Tensor> Forward(const WeightMap& w, const VisionFeatures& f) const = 0;
  // The training loss of Forward's `outputs` against the batch's labels.
  virtual at::Tensor Loss(const std::vector<at::Tensor>& outputs,
                          const TensorMap& labels) const = 0;
  // The training loss from the trunk's features: Loss(Forward(w, f), labels), unless the head's
  // loss reads what its outputs do not hold (DPTForSemanticSegmentation's auxiliary head).
  virtual at::Tensor FeaturesLoss(const WeightMap& w, const VisionFeatures& f,
                                  const TensorMap& labels) const {
    return Loss(Forward(w, f), labels);
  }
  // Draws the labels of a batch of `batch_size` from `gen` (after pixel_values).
  virtual void AddLabels(at::Generator& gen, int64_t batch_size, TensorMap& labels) const = 0;
  // Initializes `t` if the head has its own rule for weight `name` (its BatchNorm scales: 1);
  // false leaves it to the model's policy.
  virtual bool InitWeight(const std::string& /*name*/, at::Tensor& /*t*/,
                          at::Generator& /*gen*/) const {
    return false;
  }

 protected:
  void Add(const std::string& name, std::vector<int64_t> shape) {
    weights_.emplace_back(name, std::move(shape));
  }

 private:
  WeightList weights_;
};

// ---- heads/image_classification.cc

struct ImageClassifierRecipe {
  std::string prefix = "classifier.";  // "classifier.1." (ResNet's Sequential)
  int64_t num_labels = 2;
  int64_t width = 0;    // the trunk's PooledWidth()
  bool flatten = true;  // pooled.flatten(1) first (pooled maps); false: pooled is token 0
  // CLIPForImageClassification: the mean of last_hidden_state[:, prefix_tokens:] (the patch
  // tokens) instead of the pooled features.
  bool mean_patches = false;
  // Dinov2ForImageClassification: cat(token 0, the mean of the patch tokens), width 2 x hidden.
  bool cls_and_mean = false;
  int64_t prefix_tokens = 1;  // tokens before the patches (cls, registers)
};

// logits [B, L] = classifier(pooled); loss HF's: cross entropy, MSE when num_labels == 1.
// Labels "labels": int64 [B] in [0, L), or float [B] when L == 1.
std::unique_ptr<ImageHead> ImageClassificationHead(ImageClassifierRecipe recipe);

// DeiTForImageClassificationWithTeacher: cls_classifier on token 0 and distillation_classifier
// on token 1; outputs logits (their mean), cls_logits, distillation_logits; loss and labels as
// ImageClassificationHead on logits.
std::unique_ptr<ImageHead> DistilledImageClassificationHead(int64_t num_labels, int64_t width);

// ---- heads/image_features.cc

// The base model has no HF loss; it regresses its outputs onto random targets.
enum class FeatureLoss {
  // ViTModel (as BertModel): labels "labels" of last_hidden_state's shape;
  // mse(last_hidden_state, t) + mse(pooler_output, t[:, 0]).
  kSequenceAndFirstToken,
  // Every other vision base model: labels "target" of last_hidden_state's shape;
  // mean((last_hidden_state - t)^2) + mean(pooler_output^2).
  kTargetAndZeroPooled,
};

struct ImageFeaturesRecipe {
  bool tanh_pooler = false;  // pooler_output = tanh(pooler.dense(pooled)); else pooled itself
  int64_t width = 0;         // the trunk's PooledWidth()
  FeatureLoss loss = FeatureLoss::kTargetAndZeroPooled;
  std::vector<int64_t> last_hidden_shape;  // without the batch dimension
  // False: the model returns last_hidden_state alone (ViTMSNModel deletes ViTModel's pooler);
  // the loss is mean((last_hidden_state - target)^2).
  bool pooler_output = true;
};

// Outputs last_hidden_state, pooler_output.
std::unique_ptr<ImageHead> ImageFeaturesHead(ImageFeaturesRecipe recipe);

// ---- heads/backbone.cc

// *Backbone (BackboneMixin, transformers' backbone_utils): feature_maps of the default
// out_features (the last stage). For a token trunk: the patch tokens of last_hidden_state
// (after `prefix_tokens`) reshaped to [B, hidden, grid, grid] (reshape_hidden_states); for a map
// trunk: its last map. transformers gives backbones no loss: mean((feature_maps - target)^2),
// labels "target" of the feature maps' shape.
struct BackboneRecipe {
  int64_t prefix_tokens = 1;  // token trunks; < 0: the trunk's last_hidden_state is a map
  int64_t grid = 0;           // token trunks: patches per side
  // ConvNextBackbone's hidden_states_norms.<stage>: a channels-first LayerNorm (weights
  // `<norm>.weight` / `.bias`, eps 1e-6) over the map; empty: none.
  std::string norm = "";
  std::vector<int64_t> map_shape;  // the feature map without the batch dimension
};
std::unique_ptr<ImageHead> BackboneHead(BackboneRecipe recipe);
// The stage selection of a BackboneMixin config as the zoo serves it: out_features /
// out_indices, when given, name only the last of `stages` stages ("stage<stages>", index
// `stages` or -1), transformers' default; anything else is refused naming the field.
Status CheckLastStageBackbone(const nlohmann::json& config, int64_t stages);

// ---- heads/semantic_segmentation.cc

// SegformerForSemanticSegmentation's SegformerDecodeHead (weights under "decode_head."): each
// stage's map through linear_c.I.proj (a Linear over its tokens), bilinearly resized
// (align_corners false) to stage 0's size, concatenated last stage first, linear_fuse (a 1x1 conv
// without bias), batch_norm (eval mode), ReLU, classifier (a 1x1 conv). Outputs logits [B, L,
// H_0, W_0]. Loss as transformers: the logits resized bilinearly to the labels' size, cross
// entropy with ignore_index = semantic_loss_ignore_index (num_labels > 1), or the masked BCE
// with logits over the valid pixels (num_labels == 1). Labels "labels" int64 [B, image, image]
// in [0, L), the first row of image 0 set to the ignore index.
struct SegmentationHeadRecipe {
  std::vector<int64_t> stage_widths;  // hidden_sizes
  int64_t decoder_hidden = 256, num_labels = 2, ignore_index = 255, image_size = 224;
};
std::unique_ptr<ImageHead> SegformerDecodeHead(SegmentationHeadRecipe recipe);

// ---- heads/depth_estimation.cc

// GLPNForDepthEstimation's GLPNDecoder and GLPNDepthEstimationHead: the stages' maps last first,
// each through decoder.stages.K (`convolution`, a 1x1 conv to decoder_hidden_size, absent when
// the widths match; from K = 1 the selective feature fusion with the previous stage's output:
// convolutional_layer1 (3x3 conv, BatchNorm, ReLU), convolutional_layer2 (likewise, to half the
// width), convolutional_layer3 (3x3 conv to 2 maps), sigmoid, local * a0 + global * a1; then a
// bilinear x2 upsample), the last stage's output upsampled x2 again, then head.head (3x3 conv,
// ReLU, 3x3 conv to 1 map) on the decoder output `head_in_index`, sigmoid * max_depth. Outputs
// predicted_depth [B, H, W]. Loss transformers' SiLogLoss over the pixels whose target is > 0:
// sqrt(mean(d^2) - 0.5 mean(d)^2), d = log(target) - log(predicted). Labels "labels" float [B, H,
// W] (the prediction's size) in (0.1 max_depth, max_depth), the first row of image 0 zero
// (invalid pixels).
struct DepthHeadRecipe {
  std::vector<int64_t> stage_widths;  // hidden_sizes
  std::vector<int64_t> stage_sides;   // each stage's map side for the batch's images
  int64_t decoder_hidden = 64, head_in_index = -1;
  double max_depth = 10;
};
std::unique_ptr<ImageHead> GlpnDepthHead(DepthHeadRecipe recipe);

// The head of a class of a pooled-map family (resnet, convnext, mobilenet_v2, efficientnet,
// swin): `base` gives ImageFeaturesHead (pooler_output = the trunk's pooled features, loss
// kTargetAndZeroPooled), otherwise ImageClassificationHead over the flattened pooled features.
std::unique_ptr<ImageHead> PooledImageHead(bool base, const VisionTrunk& trunk, int64_t num_labels,
                                           const std::string& classifier = "classifier.");

// Classes whose base model returns last_hidden_state alone (pvt, pvt_v2, cvt, poolformer, vit_msn,
// vitdet, segformer, videomae; glpn, swiftformer, ijepa's base), by the ending of transformers'
// class name: "ForImageClassification", "Backbone", "Model" the base model; any other ending
// throws naming the class (a head it would otherwise get silently: VideoMAE's classifier ends in
// "ForVideoClassification", and its family passes the kind itself).
enum class VisionHeadKind { kFeatures, kClassification, kBackbone };
VisionHeadKind VisionHeadKindOf(const std::string& arch);
// kFeatures: ImageFeaturesHead without pooler_output (loss kTargetAndZeroPooled);
// kClassification: ImageClassificationHead `classifier.` on the trunk's pooled features as they
// are (token 0 or a pooled [B, C]); kBackbone: BackboneHead over the trunk's last map.
std::unique_ptr<ImageHead> VisionHeadFor(VisionHeadKind kind, const VisionTrunk& trunk,
                                         int64_t num_labels);

}  // namespace ts::zoo::internal
