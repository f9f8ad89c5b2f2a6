// QuestionAnswering head: qa_outputs [2, H] split into start and end logits [B, S]; the mean of
// the two cross entropies, positions clamped to [0, S] as HF does.
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/text_head.h"

namespace ts::zoo::internal {
namespace {

class QuestionAnsweringHead : public TextHead {
 public:
  using TextHead::TextHead;

  WeightShapeList Weights() const override { return LinearWeights(2); }
  std::vector<std::string> OutputNames() const override { return {"start_logits", "end_logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& hidden,
                                  const at::Tensor&) const override {
    at::Tensor logits = Project(w, hidden);
    return {logits.select(-1, 0).contiguous(), logits.select(-1, 1).contiguous()};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    const int64_t s = out[0].size(1);
    at::Tensor sp = GetInput(labels, "start_positions").clamp(0, s);
    at::Tensor ep = GetInput(labels, "end_positions").clamp(0, s);
    return (CrossEntropy(out[0], sp) + CrossEntropy(out[1], ep)) / 2;
  }

  // A start in the first half, an end up to a quarter of the sequence after it.
  void AddLabels(at::Generator& gen, const at::Tensor& ids, const at::Tensor&,
                 TensorMap& labels) const override {
    const int64_t b = ids.size(0), s = ids.size(1);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    at::Tensor start = at::randint(0, s / 2, {b}, gen, lopts);
    labels["start_positions"] = start;
    labels["end_positions"] = start + at::randint(0, s / 4, {b}, gen, lopts);
  }
};

}  // namespace

std::unique_ptr<TextHead> MakeQuestionAnsweringHead(TextHeadSpec spec) {
  return std::make_unique<QuestionAnsweringHead>(std::move(spec));
}

}  // namespace ts::zoo::internal
