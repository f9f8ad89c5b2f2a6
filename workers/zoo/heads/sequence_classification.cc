// SequenceClassification head: per-token scores [B, S, L] pooled at the last attended token
// (HF pools at the last non-pad token of input_ids); cross entropy, MSE when num_labels == 1.
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/text_head.h"

namespace ts::zoo::internal {
namespace {

class SequenceClassificationHead : public TextHead {
 public:
  using TextHead::TextHead;

  WeightShapeList Weights() const override { return LinearWeights(spec_.num_labels); }
  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& hidden,
                                  const at::Tensor& mask) const override {
    at::Tensor logits = Project(w, hidden);
    if (spec_.final_softcap > 0)
      logits = at::tanh(logits / spec_.final_softcap) * spec_.final_softcap;
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
};

}  // namespace

std::unique_ptr<TextHead> MakeSequenceClassificationHead(TextHeadSpec spec) {
  return std::make_unique<SequenceClassificationHead>(std::move(spec));
}

}  // namespace ts::zoo::internal
