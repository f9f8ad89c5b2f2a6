// The base model (no head): last_hidden_state [B, S, H]. HF has no loss for it; training
// regresses it onto a seeded random target (MSE).
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/text_head.h"

namespace ts::zoo::internal {
namespace {

class BaseModelHead : public TextHead {
 public:
  using TextHead::TextHead;

  WeightShapeList Weights() const override { return {}; }
  std::vector<std::string> OutputNames() const override { return {"last_hidden_state"}; }

  std::vector<at::Tensor> Forward(const WeightMap&, const at::Tensor& hidden,
                                  const at::Tensor&) const override {
    return {hidden};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    return at::mse_loss(out[0], GetInput(labels, "labels").to(out[0].scalar_type()));
  }

  void AddLabels(at::Generator& gen, const at::Tensor& ids, const at::Tensor&,
                 TensorMap& labels) const override {
    labels["labels"] = at::randn({ids.size(0), ids.size(1), spec_.hidden}, gen,
                                 at::TensorOptions().dtype(at::kFloat));
  }
};

}  // namespace

std::unique_ptr<TextHead> MakeBaseModelHead(TextHeadSpec spec) {
  return std::make_unique<BaseModelHead>(std::move(spec));
}

}  // namespace ts::zoo::internal
