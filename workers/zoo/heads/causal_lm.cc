// CausalLM head: logits [B, S, V] over the vocabulary (tied to the embedding or its own
// lm_head), optionally scaled (granite, cohere) or soft-capped (gemma2); shifted cross entropy.
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/text_head.h"

namespace ts::zoo::internal {
namespace {

class CausalLmHead : public TextHead {
 public:
  using TextHead::TextHead;

  WeightShapeList Weights() const override { return LinearWeights(spec_.vocab); }
  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& hidden,
                                  const at::Tensor&) const override {
    at::Tensor logits = Project(w, hidden);
    if (spec_.final_softcap > 0)
      logits = at::tanh(logits / spec_.final_softcap) * spec_.final_softcap;
    if (spec_.logit_mult != 1.0) logits = logits * spec_.logit_mult;
    return {logits};
  }

  // HF: logits[:, :-1] against labels[:, 1:], ignoring -100.
  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    const at::Tensor& logits = out[0];
    const at::Tensor& target = GetInput(labels, "labels");
    const int64_t s = logits.size(1);
    at::Tensor shift_logits = logits.narrow(1, 0, s - 1).reshape({-1, logits.size(-1)});
    at::Tensor shift_labels = target.narrow(1, 1, s - 1).reshape({-1});
    return CrossEntropy(shift_logits, shift_labels);
  }

  // The inputs themselves, padding labelled -100.
  void AddLabels(at::Generator&, const at::Tensor& ids, const at::Tensor& mask,
                 TensorMap& labels) const override {
    labels["labels"] = ids.masked_fill(mask.eq(0), -100);
  }
};

}  // namespace

std::unique_ptr<TextHead> MakeCausalLmHead(TextHeadSpec spec) {
  return std::make_unique<CausalLmHead>(std::move(spec));
}

}  // namespace ts::zoo::internal
