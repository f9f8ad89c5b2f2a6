// The encoders' *ForPreTraining head: the masked-LM head and a sentence-pair classifier over the
// pooled token 0 (BertPreTrainingHeads: cls.predictions and cls.seq_relationship; ALBERT's
// predictions and sop_classifier.classifier), both computed from the same hidden states.
// Outputs prediction_logits [B, S, V] and the pair logits [B, 2]; the loss is transformers'
// masked_lm_loss + the pair's cross entropy (BertForPreTraining.forward, AlbertForPreTraining).
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/text_head.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {
namespace {

class PreTrainingHead : public TextHead {
 public:
  PreTrainingHead(TextHeadSpec lm, TextHeadSpec pair, PairNames names)
      : TextHead(lm),
        lm_(MakeMaskedLmHead(std::move(lm))),
        pair_(MakeSequenceClassificationHead(std::move(pair))),
        names_(std::move(names)) {}

  WeightShapeList Weights() const override {
    WeightShapeList out = lm_->Weights();
    for (auto& weight : pair_->Weights()) out.push_back(std::move(weight));
    return out;
  }

  std::vector<std::string> OutputNames() const override {
    return {"prediction_logits", names_.output};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& hidden,
                                  const at::Tensor& mask) const override {
    return {lm_->Forward(w, hidden, mask)[0], pair_->Forward(w, hidden, mask)[0]};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    const TensorMap pair_labels = {{"labels", GetInput(labels, names_.label)}};
    return lm_->Loss({out[0]}, labels) + pair_->Loss({out[1]}, pair_labels);
  }

  // `labels` (the masked positions, as the masked-LM head draws them), then the pair's label.
  void AddLabels(at::Generator& gen, const at::Tensor& ids, const at::Tensor& mask,
                 TensorMap& labels) const override {
    lm_->AddLabels(gen, ids, mask, labels);
    TensorMap pair;
    pair_->AddLabels(gen, ids, mask, pair);
    labels[names_.label] = pair.at("labels");
  }

 private:
  std::unique_ptr<TextHead> lm_, pair_;
  PairNames names_;
};

// ElectraForPreTraining (modeling_electra.py): the discriminator, ElectraDiscriminatorPredictions
// = dense (hidden -> hidden), hidden_act, dense_prediction (hidden -> 1), squeezed: one logit per
// token [B, S] ("was this token replaced?"); loss BCEWithLogits over the attended tokens of 0/1
// labels. `spec.name` is the module ("discriminator_predictions"), `spec.dense_act` hidden_act.
class DiscriminatorHead : public TextHead {
 public:
  using TextHead::TextHead;

  WeightShapeList Weights() const override {
    const int64_t h = spec_.hidden;
    return {{spec_.name + ".dense.weight", {h, h}},
            {spec_.name + ".dense.bias", {h}},
            {spec_.name + ".dense_prediction.weight", {1, h}},
            {spec_.name + ".dense_prediction.bias", {1}}};
  }

  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& hidden,
                                  const at::Tensor&) const override {
    const std::string& p = spec_.name;
    at::Tensor x =
        nn::Linear(hidden, GetWeight(w, p + ".dense.weight"), GetWeight(w, p + ".dense.bias"));
    x = nn::Activate(x, spec_.dense_act.value_or(Activation::kGeluErf));
    x = nn::Linear(x, GetWeight(w, p + ".dense_prediction.weight"),
                   GetWeight(w, p + ".dense_prediction.bias"));
    return {x.squeeze(-1)};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    const at::Tensor& logits = out[0];
    const at::Tensor& target = GetInput(labels, "labels");
    // The mean over the attended tokens, without a data-dependent selection.
    const at::Tensor m = GetInput(labels, "label_mask").to(logits.scalar_type());
    at::Tensor each = at::binary_cross_entropy_with_logits(logits, target.to(logits.scalar_type()),
                                                           {}, {}, at::Reduction::None);
    return (each * m).sum() / m.sum();
  }

  // 0/1 per token, and which tokens are attended (transformers masks the loss with
  // attention_mask).
  void AddLabels(at::Generator& gen, const at::Tensor& ids, const at::Tensor& mask,
                 TensorMap& labels) const override {
    labels["labels"] = at::randint(0, 2, ids.sizes(), gen, at::TensorOptions().dtype(at::kLong));
    labels["label_mask"] = mask.defined() ? mask : at::ones_like(ids);
  }
};

}  // namespace

std::unique_ptr<TextHead> MakeDiscriminatorHead(TextHeadSpec spec) {
  return std::make_unique<DiscriminatorHead>(std::move(spec));
}

std::unique_ptr<TextHead> MakePreTrainingHead(TextHeadSpec lm, TextHeadSpec pair, PairNames names) {
  return std::make_unique<PreTrainingHead>(std::move(lm), std::move(pair), std::move(names));
}

}  // namespace ts::zoo::internal
