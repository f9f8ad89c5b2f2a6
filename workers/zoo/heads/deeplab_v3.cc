// DeepLabV3 (heads/deeplab_v3.h): MobileViTDeepLabV3 / MobileViTV2DeepLabV3, and the classes of
// the families that use it.
#include "workers/zoo/heads/deeplab_v3.h"

#include <ATen/CPUGeneratorImpl.h>

#include <set>
#include <string>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/nn_convolutions.h"
#include "workers/zoo/trunks/vision_conv.h"

namespace ts::zoo::internal {
namespace {

class DeepLabV3 : public ImageHead {
 public:
  explicit DeepLabV3(DeepLabV3Recipe r) : c_(std::move(r)) {
    const int64_t o = c_.aspp_out, in = c_.in_channels;
    const std::string a = "segmentation_head.aspp.";
    ConvBn(a + "convs.0.", in, o, 1);
    for (int i = 0; i < 3; ++i) ConvBn(a + "convs." + std::to_string(i + 1) + ".", in, o, 3);
    ConvBn(a + "convs.4.conv_1x1.", in, o, 1);
    ConvBn(a + "project.", 5 * o, o, 1);
    Add("segmentation_head.classifier.convolution.weight", {c_.num_labels, o, 1, 1});
    Add("segmentation_head.classifier.convolution.bias", {c_.num_labels});
  }

  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& /*gen*/) const override {
    if (!bn_weights_.count(name)) return false;
    t.fill_(1.0);
    return true;
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const VisionFeatures& f) const override {
    const at::Tensor& x = f.stages.back();
    const std::string a = "segmentation_head.aspp.";
    std::vector<at::Tensor> pyramid = {Relu(w, a + "convs.0.", x, 1)};
    for (int i = 0; i < 3; ++i)
      pyramid.push_back(Relu(w, a + "convs." + std::to_string(i + 1) + ".", x, c_.atrous_rates[i]));
    at::Tensor pooled = Relu(w, a + "convs.4.conv_1x1.", at::adaptive_avg_pool2d(x, {1, 1}), 1);
    pyramid.push_back(at::upsample_bilinear2d(pooled, {x.size(2), x.size(3)}, false));
    at::Tensor y = Relu(w, a + "project.", at::cat(pyramid, 1), 1);
    return {nn::Conv2d(y, GetWeight(w, "segmentation_head.classifier.convolution.weight"),
                       GetWeight(w, "segmentation_head.classifier.convolution.bias"), 1)};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    const at::Tensor& y = GetInput(labels, "labels");
    at::Tensor up = at::upsample_bilinear2d(out[0], {y.size(1), y.size(2)}, false);
    return at::cross_entropy_loss(up, y, /*weight=*/{}, at::Reduction::Mean, c_.ignore_index);
  }

  void AddLabels(at::Generator& gen, int64_t batch_size, TensorMap& labels) const override {
    at::Tensor y = at::randint(0, c_.num_labels, {batch_size, c_.image_size, c_.image_size}, gen,
                               at::TensorOptions().dtype(at::kLong));
    y[0][0].fill_(c_.ignore_index);
    labels["labels"] = y;
  }

 private:
  void ConvBn(const std::string& p, int64_t in, int64_t out, int64_t k) {
    Add(p + "convolution.weight", {out, in, k, k});
    bn_weights_.insert(p + "normalization.weight");
    for (const char* s : {"weight", "bias", "running_mean", "running_var"})
      Add(p + "normalization." + s, {out});
  }

  // A MobileViTConvLayer with relu: (k - 1) / 2 * dilation padding.
  at::Tensor Relu(const WeightMap& w, const std::string& p, const at::Tensor& x,
                  int64_t dilation) const {
    const at::Tensor& weight = GetWeight(w, p + "convolution.weight");
    const int64_t pad = (weight.size(2) - 1) / 2 * dilation;
    at::Tensor y = nn::DilatedConv2d(x, weight, at::Tensor(), 1, pad, dilation);
    return at::relu(BatchNorm2d(w, p + "normalization.", y, 1e-5));
  }

  DeepLabV3Recipe c_;
  std::set<std::string> bn_weights_;
};

}  // namespace

std::unique_ptr<ImageHead> DeepLabV3Head(DeepLabV3Recipe recipe) {
  return std::make_unique<DeepLabV3>(std::move(recipe));
}

std::vector<ArchEntry> DeepLabV3Archs(const PooledVisionFamily& family,
                                      const nlohmann::json& example, int64_t aspp_out_channels,
                                      decltype(ArchEntry::scale) scale,
                                      MakeDeepLabV3Trunk make_trunk) {
  enum class Head { kModel, kClassification, kSegmentation };
  auto build = [family, make_trunk](Head head) -> decltype(ArchEntry::build) {
    return [family, make_trunk, head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
      const bool base = head == Head::kModel, seg = head == Head::kSegmentation;
      TS_ASSIGN_OR_RETURN(DeepLabV3Trunk t,
                          make_trunk(spec.tiny_config, base ? "" : family.prefix, seg));
      if (seg && t.head.num_labels < 2)
        return InvalidArgumentError("num_labels: the segmentation loss needs at least 2 labels");
      std::unique_ptr<ImageHead> h =
          seg ? DeepLabV3Head(t.head)
              : PooledImageHead(base, *t.trunk, t.head.num_labels, family.classifier);
      return MakeVisionModel(std::move(spec), std::move(t.trunk), std::move(h));
    };
  };
  nlohmann::json base = example;
  base.erase("num_labels");
  nlohmann::json seg = example;
  seg["num_labels"] = 21;
  seg["output_stride"] = 16;
  seg["image_size"] = 512;
  seg["aspp_out_channels"] = aspp_out_channels;
  seg["atrous_rates"] = {6, 12, 18};
  seg["aspp_dropout_prob"] = 0.1;
  seg["semantic_loss_ignore_index"] = 255;
  const std::string model = family.name + "Model";
  const std::string classifier = family.name + "ForImageClassification";
  const std::string segmentation = family.name + "ForSemanticSegmentation";
  return {{{model, family.model_type, "image-feature-extraction"},
           WithArchitecture(base, model),
           scale,
           build(Head::kModel)},
          {{classifier, family.model_type, "image-classification"},
           WithArchitecture(example, classifier),
           scale,
           build(Head::kClassification)},
          {{segmentation, family.model_type, "image-segmentation"},
           WithArchitecture(seg, segmentation),
           scale,
           build(Head::kSegmentation)}};
}

}  // namespace ts::zoo::internal
