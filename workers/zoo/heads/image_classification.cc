// Image classification heads (heads/image_head.h).
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {
namespace {

// HF's image classification loss: MSE for one label (regression), cross entropy otherwise.
at::Tensor ClassificationLoss(const at::Tensor& logits, const TensorMap& labels_map,
                              int64_t num_labels) {
  const at::Tensor& labels = GetInput(labels_map, "labels");
  if (num_labels == 1) return at::mse_loss(logits.squeeze(-1), labels.to(logits.scalar_type()));
  return CrossEntropy(logits, labels);
}

void AddClassLabels(at::Generator& gen, int64_t batch_size, int64_t num_labels, TensorMap& labels) {
  const auto fopts = at::TensorOptions().dtype(at::kFloat);
  labels["labels"] = num_labels == 1 ? at::randn({batch_size}, gen, fopts)
                                     : at::randint(0, num_labels, {batch_size}, gen,
                                                   at::TensorOptions().dtype(at::kLong));
}

class ClassificationHead : public ImageHead {
 public:
  explicit ClassificationHead(ImageClassifierRecipe r) : r_(std::move(r)) {
    Add(r_.prefix + "weight", {r_.num_labels, r_.width});
    Add(r_.prefix + "bias", {r_.num_labels});
  }

  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const VisionFeatures& f) const override {
    const at::Tensor& h = f.last_hidden_state;
    at::Tensor x;
    if (r_.mean_patches || r_.cls_and_mean) {
      at::Tensor mean = h.narrow(1, r_.prefix_tokens, h.size(1) - r_.prefix_tokens).mean(1);
      x = r_.cls_and_mean ? at::cat({h.select(1, 0), mean}, -1) : mean;
    } else {
      x = r_.flatten ? f.pooled.flatten(1) : f.pooled;
    }
    return {nn::Linear(x, GetWeight(w, r_.prefix + "weight"), GetWeight(w, r_.prefix + "bias"))};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    return ClassificationLoss(out[0], labels, r_.num_labels);
  }

  void AddLabels(at::Generator& gen, int64_t batch_size, TensorMap& labels) const override {
    AddClassLabels(gen, batch_size, r_.num_labels, labels);
  }

 private:
  ImageClassifierRecipe r_;
};

class DistilledHead : public ImageHead {
 public:
  DistilledHead(int64_t num_labels, int64_t width) : num_labels_(num_labels) {
    Add("cls_classifier.weight", {num_labels, width});
    Add("cls_classifier.bias", {num_labels});
    Add("distillation_classifier.weight", {num_labels, width});
    Add("distillation_classifier.bias", {num_labels});
  }

  std::vector<std::string> OutputNames() const override {
    return {"logits", "cls_logits", "distillation_logits"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const VisionFeatures& f) const override {
    at::Tensor cls = nn::Linear(f.pooled, GetWeight(w, "cls_classifier.weight"),
                                GetWeight(w, "cls_classifier.bias"));
    at::Tensor dist =
        nn::Linear(f.last_hidden_state.select(1, 1), GetWeight(w, "distillation_classifier.weight"),
                   GetWeight(w, "distillation_classifier.bias"));
    return {(cls + dist) / 2, cls, dist};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    return ClassificationLoss(out[0], labels, num_labels_);
  }

  void AddLabels(at::Generator& gen, int64_t batch_size, TensorMap& labels) const override {
    AddClassLabels(gen, batch_size, num_labels_, labels);
  }

 private:
  int64_t num_labels_;
};

}  // namespace

std::unique_ptr<ImageHead> ImageClassificationHead(ImageClassifierRecipe recipe) {
  return std::make_unique<ClassificationHead>(std::move(recipe));
}

std::unique_ptr<ImageHead> DistilledImageClassificationHead(int64_t num_labels, int64_t width) {
  return std::make_unique<DistilledHead>(num_labels, width);
}

}  // namespace ts::zoo::internal
