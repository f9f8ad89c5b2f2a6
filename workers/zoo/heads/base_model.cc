// The base model (no head): last_hidden_state [B, S, H], and an encoder's pooler_output [B, H]
// (tanh pooler over token 0) where the spec names a pooler; or, with `pooled_only` (DPR's
// encoders), pooler_output alone: token 0's features [B, H], or [B, dense_width] when projected.
// HF has no loss for it; training regresses them onto a seeded random target (MSE; the pooler
// onto the target's first position; a pooled-only output onto a target of its own shape).
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/text_head.h"

namespace ts::zoo::internal {
namespace {

class BaseModelHead : public TextHead {
 public:
  using TextHead::TextHead;

  WeightShapeList Weights() const override { return FirstTokenWeights(); }
  std::vector<std::string> OutputNames() const override {
    if (spec_.pooled_only) return {"pooler_output"};
    if (!spec_.pooler.empty()) return {"last_hidden_state", "pooler_output"};
    return {"last_hidden_state"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& hidden,
                                  const at::Tensor&) const override {
    if (spec_.pooled_only) return {FirstTokenFeatures(w, hidden)};
    if (spec_.pooler.empty()) return {hidden};
    return {hidden, FirstTokenFeatures(w, hidden)};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    const at::Tensor& target = GetInput(labels, "labels");
    at::Tensor loss = at::mse_loss(out[0], target.to(out[0].scalar_type()));
    if (out.size() > 1)
      loss = loss + at::mse_loss(out[1], target.select(1, 0).to(out[1].scalar_type()));
    return loss;
  }

  void AddLabels(at::Generator& gen, const at::Tensor& ids, const at::Tensor&,
                 TensorMap& labels) const override {
    const auto opts = at::TensorOptions().dtype(at::kFloat);
    if (spec_.pooled_only) {
      const int64_t width = spec_.dense_width > 0 ? spec_.dense_width : spec_.hidden;
      labels["labels"] = at::randn({ids.size(0), width}, gen, opts);
      return;
    }
    labels["labels"] = at::randn({ids.size(0), ids.size(1), spec_.hidden}, gen, opts);
  }
};

}  // namespace

std::unique_ptr<TextHead> MakeBaseModelHead(TextHeadSpec spec) {
  return std::make_unique<BaseModelHead>(std::move(spec));
}

}  // namespace ts::zoo::internal
