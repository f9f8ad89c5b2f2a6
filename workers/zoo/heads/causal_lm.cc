// The LM heads: logits [B, S, V] over the vocabulary (tied to the embedding or its own
// lm_head), after the encoders' LM transform where the spec has one. CausalLM: optionally scaled
// (granite, cohere) or soft-capped (gemma2); shifted cross entropy. MaskedLM (encoders): cross
// entropy over the ~15% of attended positions that carry a label (position 1 always).
#include <algorithm>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/text_head.h"

namespace ts::zoo::internal {
namespace {

class CausalLmHead : public TextHead {
 public:
  using TextHead::TextHead;

  WeightShapeList Weights() const override {
    WeightShapeList out = TransformWeights();
    if (!spec_.lm_extra.empty())  // MobileBertLMPredictionHead.dense, before the decoder
      out.emplace_back(spec_.lm_extra + ".weight",
                       std::vector<int64_t>{spec_.lm_extra_rows, spec_.vocab});
    for (auto& weight : LinearWeights(spec_.vocab)) out.push_back(std::move(weight));
    return out;
  }
  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& hidden,
                                  const at::Tensor&) const override {
    at::Tensor logits = Project(w, Transform(w, hidden));
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

class MaskedLmHead : public CausalLmHead {
 public:
  using CausalLmHead::CausalLmHead;

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    return PerTokenCrossEntropy(out[0], GetInput(labels, "labels"));
  }

  void AddLabels(at::Generator& gen, const at::Tensor& ids, const at::Tensor& mask,
                 TensorMap& labels) const override {
    const int64_t b = ids.size(0), s = ids.size(1);
    at::Tensor pick = at::rand({b, s}, gen, at::TensorOptions().dtype(at::kFloat)).lt(0.15);
    pick.narrow(1, std::min<int64_t>(1, s - 1), 1).fill_(true);
    pick = at::logical_and(pick, mask.ne(0));
    labels["labels"] = ids.masked_fill(pick.logical_not(), -100);
  }
};

}  // namespace

std::unique_ptr<TextHead> MakeMaskedLmHead(TextHeadSpec spec) {
  return std::make_unique<MaskedLmHead>(std::move(spec));
}

std::unique_ptr<TextHead> MakeCausalLmHead(TextHeadSpec spec) {
  return std::make_unique<CausalLmHead>(std::move(spec));
}

}  // namespace ts::zoo::internal
