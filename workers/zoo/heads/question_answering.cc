// QuestionAnswering head: qa_outputs [2, H] split into start and end logits [B, S]; the mean of
// the two cross entropies, positions clamped to [0, S] as HF does.
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/text_head.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {
namespace {

class QuestionAnsweringHead : public TextHead {
 public:
  using TextHead::TextHead;

  WeightShapeList Weights() const override {
    const TextHeadSpec& s = spec();
    if (s.qa_block.empty()) return LinearWeights(2);
    const std::string b = s.qa_block;
    WeightShapeList out = {{b + ".intermediate.dense.weight", {s.qa_inter, s.hidden}},
                           {b + ".intermediate.dense.bias", {s.qa_inter}},
                           {b + ".output.dense.weight", {s.hidden, s.qa_inter}},
                           {b + ".output.dense.bias", {s.hidden}},
                           {b + ".output.LayerNorm.weight", {s.hidden}},
                           {b + ".output.LayerNorm.bias", {s.hidden}}};
    for (auto& lw : LinearWeights(2)) out.push_back(std::move(lw));
    return out;
  }
  std::vector<std::string> OutputNames() const override { return {"start_logits", "end_logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& hidden,
                                  const at::Tensor&) const override {
    at::Tensor x = hidden;
    if (!spec().qa_block.empty()) {  // BigBirdIntermediate, then BigBirdOutput's residual norm
      const std::string b = spec().qa_block;
      at::Tensor t = nn::Linear(hidden, GetWeight(w, b + ".intermediate.dense.weight"),
                                GetWeight(w, b + ".intermediate.dense.bias"));
      t = nn::Activate(t, spec().qa_act);
      t = nn::Linear(t, GetWeight(w, b + ".output.dense.weight"),
                     GetWeight(w, b + ".output.dense.bias"));
      x = nn::LayerNorm(t + hidden, GetWeight(w, b + ".output.LayerNorm.weight"),
                        GetWeight(w, b + ".output.LayerNorm.bias"), spec().norm_eps);
    }
    at::Tensor logits = Project(w, x);
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
    at::Tensor start = at::randint(spec().qa_min_start, s / 2, {b}, gen, lopts);
    labels["start_positions"] = start;
    labels["end_positions"] = start + at::randint(0, s / 4, {b}, gen, lopts);
  }
};

}  // namespace

std::unique_ptr<TextHead> MakeQuestionAnsweringHead(TextHeadSpec spec) {
  return std::make_unique<QuestionAnsweringHead>(std::move(spec));
}

}  // namespace ts::zoo::internal
