// CTC head (Wav2Vec2ForCTC): `lm_head` per frame over wav2vec2's encoder (`wav2vec2.`); loss
// HF's CTC: log_softmax over the vocab as [T, B, V], blank = pad_token_id, labels < 0 padding,
// `ctc_loss_reduction` sum or mean, `ctc_zero_infinity`.
#include <ATen/CPUGeneratorImpl.h>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/audio_heads.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

class Wav2Vec2Ctc : public Wav2Vec2Trunk {
 public:
  Wav2Vec2Ctc(ModelSpec spec, Wav2Vec2Recipe recipe)
      : Wav2Vec2Trunk(std::move(spec), recipe, recipe.base) {
    AddLinear("lm_head", r_.vocab, r_.OutWidth());
  }

  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor hs = Encode(w, inputs).first;
    return {nn::Linear(hs, GetWeight(w, "lm_head.weight"), GetWeight(w, "lm_head.bias"))};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    at::Tensor log_probs = at::log_softmax(out[0], -1).transpose(0, 1);
    const int64_t b = out[0].size(0), t = out[0].size(1);
    at::Tensor input_lengths = at::full({b}, t, labels.options());
    at::Tensor target_lengths = (labels >= 0).sum(-1);
    return at::ctc_loss(log_probs, labels.clamp_min(0), input_lengths, target_lengths, r_.pad,
                        r_.ctc_sum ? at::Reduction::Sum : at::Reduction::Mean, r_.zero_infinity);
  }

  // Non-blank character ids; row 1 has its last quarter padded with -100 (HF).
  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    Batch batch;
    batch.inputs[InputName()] = InputValues(gen, batch_size);
    const int64_t l = kW2vFrames / 4;
    at::Tensor labels =
        at::randint(0, r_.vocab - 1, {batch_size, l}, gen, at::TensorOptions().dtype(at::kLong));
    labels = labels + (labels >= r_.pad).to(at::kLong);
    if (batch_size > 1) labels[1][l - 1] = -100;
    batch.labels["labels"] = labels;
    return batch;
  }
};

}  // namespace

std::unique_ptr<Model> MakeWav2Vec2Ctc(ModelSpec spec, Wav2Vec2Recipe recipe) {
  return std::make_unique<Wav2Vec2Ctc>(std::move(spec), std::move(recipe));
}

}  // namespace ts::zoo::internal
