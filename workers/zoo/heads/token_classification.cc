// TokenClassification head: per-token logits [B, S, L]; cross entropy over attended tokens
// (padding labelled -100).
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/text_head.h"

namespace ts::zoo::internal {
namespace {

class TokenClassificationHead : public TextHead {
 public:
  using TextHead::TextHead;

  WeightShapeList Weights() const override { return LinearWeights(spec_.num_labels); }
  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& hidden,
                                  const at::Tensor&) const override {
    return {Project(w, hidden)};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    return PerTokenCrossEntropy(out[0], GetInput(labels, "labels"));
  }

  void AddLabels(at::Generator& gen, const at::Tensor& ids, const at::Tensor& mask,
                 TensorMap& labels) const override {
    labels["labels"] = at::randint(0, spec_.num_labels, {ids.size(0), ids.size(1)}, gen,
                                   at::TensorOptions().dtype(at::kLong))
                           .masked_fill(mask.eq(0), -100);
  }
};

}  // namespace

std::unique_ptr<TextHead> MakeTokenClassificationHead(TextHeadSpec spec) {
  return std::make_unique<TokenClassificationHead>(std::move(spec));
}

}  // namespace ts::zoo::internal
