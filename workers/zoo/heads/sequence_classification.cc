// SequenceClassification head: per-token scores [B, S, L] pooled at the last attended token
// (decoders; HF pools at the last non-pad token of input_ids), or the classifier over token 0's
// features (encoders: pooler or dense layer); cross entropy, MSE when num_labels == 1. The
// encoders' MultipleChoice head: one score per choice row over token 0's features, cross entropy
// over the choices.
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/text_head.h"

namespace ts::zoo::internal {
namespace {

class SequenceClassificationHead : public TextHead {
 public:
  using TextHead::TextHead;

  WeightShapeList Weights() const override {
    WeightShapeList out = FirstTokenWeights();
    for (auto& weight : LinearWeights(Rows())) out.push_back(std::move(weight));
    return out;
  }
  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& hidden,
                                  const at::Tensor& mask) const override {
    if (spec_.first_token) return {Project(w, FirstTokenFeatures(w, hidden))};
    at::Tensor logits = Project(w, hidden);
    const int64_t b = hidden.size(0), s = hidden.size(1);
    const auto lopts = at::TensorOptions().dtype(at::kLong).device(hidden.device());
    at::Tensor last;
    if (mask.defined() && spec_.cast_mask_first) {
      at::Tensor m = mask.to(at::kLong);
      at::Tensor idx = at::arange(s, lopts);
      last = (idx * m).argmax(-1);
    } else if (mask.defined()) {
      at::Tensor idx = at::arange(s, lopts);
      last = (idx * mask.to(at::kLong)).argmax(-1);
    } else {
      last = at::full({b}, s - 1, lopts);
    }
    at::Tensor gather_idx = last.view({b, 1, 1}).expand({b, 1, spec_.num_labels});
    return {logits.gather(1, gather_idx).squeeze(1)};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    const at::Tensor& logits = out[0];
    const at::Tensor& target = GetInput(labels, "labels");
    if (spec_.num_labels == 1)
      return at::mse_loss(logits.squeeze(-1), target.to(logits.scalar_type()));
    return CrossEntropy(logits, target);
  }

  // One label per row: a class, or a float target for regression (num_labels == 1).
  void AddLabels(at::Generator& gen, const at::Tensor& ids, const at::Tensor&,
                 TensorMap& labels) const override {
    const int64_t b = ids.size(0);
    labels["labels"] =
        spec_.num_labels == 1
            ? at::randn({b}, gen, at::TensorOptions().dtype(at::kFloat))
            : at::randint(0, spec_.num_labels, {b}, gen, at::TensorOptions().dtype(at::kLong));
  }

 protected:
  virtual int64_t Rows() const { return spec_.num_labels; }
};

// Rows of [B * C] choices scored one by one (the trunk folds them back into [B, C]).
class MultipleChoiceHead : public SequenceClassificationHead {
 public:
  using SequenceClassificationHead::SequenceClassificationHead;

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    return CrossEntropy(out[0], GetInput(labels, "labels"));
  }

  // `ids` [B, C, S]: the right choice of each example.
  void AddLabels(at::Generator& gen, const at::Tensor& ids, const at::Tensor&,
                 TensorMap& labels) const override {
    labels["labels"] = at::randint(0, ids.size(1), {ids.size(0)}, gen,
                                   at::TensorOptions().dtype(at::kLong));
  }

 protected:
  int64_t Rows() const override { return 1; }
};

}  // namespace

std::unique_ptr<TextHead> MakeSequenceClassificationHead(TextHeadSpec spec) {
  return std::make_unique<SequenceClassificationHead>(std::move(spec));
}

std::unique_ptr<TextHead> MakeMultipleChoiceHead(TextHeadSpec spec) {
  spec.first_token = true;
  return std::make_unique<MultipleChoiceHead>(std::move(spec));
}

}  // namespace ts::zoo::internal
