// The base vision model's head (heads/image_head.h): last_hidden_state and pooler_output.
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {
namespace {

class FeaturesHead : public ImageHead {
 public:
  explicit FeaturesHead(ImageFeaturesRecipe r) : r_(std::move(r)) {
    if (!r_.tanh_pooler) return;
    // ViTModel(add_pooling_layer=True): tanh(dense(token 0)).
    Add("pooler.dense.weight", {r_.width, r_.width});
    Add("pooler.dense.bias", {r_.width});
  }

  std::vector<std::string> OutputNames() const override {
    if (!r_.pooler_output) return {"last_hidden_state"};
    return {"last_hidden_state", "pooler_output"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const VisionFeatures& f) const override {
    if (!r_.pooler_output) return {f.last_hidden_state};
    if (!r_.tanh_pooler) return {f.last_hidden_state, f.pooled};
    return {f.last_hidden_state, at::tanh(nn::Linear(f.pooled, GetWeight(w, "pooler.dense.weight"),
                                                     GetWeight(w, "pooler.dense.bias")))};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    if (r_.loss == FeatureLoss::kSequenceAndFirstToken) {
      const at::Tensor& t = GetInput(labels, "labels");
      return at::mse_loss(out[0], t.to(out[0].scalar_type())) +
             at::mse_loss(out[1], t.select(1, 0).to(out[1].scalar_type()));
    }
    const at::Tensor& t = GetInput(labels, "target");
    at::Tensor loss = (out[0] - t.to(out[0].scalar_type()).view(out[0].sizes())).pow(2).mean();
    return r_.pooler_output ? loss + out[1].pow(2).mean() : loss;
  }

  void AddLabels(at::Generator& gen, int64_t batch_size, TensorMap& labels) const override {
    std::vector<int64_t> shape = r_.last_hidden_shape;
    shape.insert(shape.begin(), batch_size);
    const char* name = r_.loss == FeatureLoss::kSequenceAndFirstToken ? "labels" : "target";
    labels[name] = at::randn(shape, gen, at::TensorOptions().dtype(at::kFloat));
  }

 private:
  ImageFeaturesRecipe r_;
};

}  // namespace

std::unique_ptr<ImageHead> ImageFeaturesHead(ImageFeaturesRecipe recipe) {
  return std::make_unique<FeaturesHead>(std::move(recipe));
}

std::unique_ptr<ImageHead> PooledImageHead(bool base, const VisionTrunk& trunk, int64_t num_labels,
                                           const std::string& classifier) {
  if (base) {
    return ImageFeaturesHead({/*tanh_pooler=*/false, trunk.PooledWidth(),
                              FeatureLoss::kTargetAndZeroPooled, trunk.LastHiddenShape()});
  }
  return ImageClassificationHead({classifier, num_labels, trunk.PooledWidth(), /*flatten=*/true});
}

VisionHeadKind VisionHeadKindOf(const std::string& arch) {
  auto ends = [&](const std::string& s) {
    return arch.size() >= s.size() && arch.compare(arch.size() - s.size(), s.size(), s) == 0;
  };
  if (ends("ForImageClassification")) return VisionHeadKind::kClassification;
  if (ends("Backbone")) return VisionHeadKind::kBackbone;
  TORCH_CHECK(ends("Model"), "zoo: no vision head for class '", arch,
              "' (expected a name ending in Model, ForImageClassification or Backbone)");
  return VisionHeadKind::kFeatures;
}

std::unique_ptr<ImageHead> VisionHeadFor(VisionHeadKind kind, const VisionTrunk& trunk,
                                         int64_t num_labels) {
  switch (kind) {
    case VisionHeadKind::kClassification:
      return ImageClassificationHead({.prefix = "classifier.",
                                      .num_labels = num_labels,
                                      .width = trunk.PooledWidth(),
                                      .flatten = false});
    case VisionHeadKind::kBackbone:
      return BackboneHead({.prefix_tokens = -1, .map_shape = trunk.LastHiddenShape()});
    case VisionHeadKind::kFeatures:
      break;
  }
  return ImageFeaturesHead({.tanh_pooler = false,
                            .width = trunk.PooledWidth(),
                            .loss = FeatureLoss::kTargetAndZeroPooled,
                            .last_hidden_shape = trunk.LastHiddenShape(),
                            .pooler_output = false});
}

}  // namespace ts::zoo::internal
