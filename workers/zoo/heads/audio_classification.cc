// Audio classification heads: the encoder's states, `projector`, the mean over frames, then
// `classifier`; cross entropy (MSE when num_labels == 1) over one label per clip.
//   WhisperForAudioClassification: over the encoder-decoder trunk's encoder alone.
//   Wav2Vec2ForSequenceClassification: over wav2vec2's encoder (`wav2vec2.`, or the family's
//   base prefix); Wav2Vec2ForAudioFrameClassification: `classifier` per frame, no projector.
#include <ATen/CPUGeneratorImpl.h>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/audio_heads.h"
#include "workers/zoo/heads/encoder_decoder_heads.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

at::Tensor Lin(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return nn::Linear(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"));
}

// projector -> mean over frames -> classifier.
at::Tensor Classify(const WeightMap& w, const at::Tensor& states) {
  return Lin(w, "classifier", Lin(w, "projector", states).mean(1));
}

class WhisperAudioClassification : public EncoderDecoderModel {
 public:
  WhisperAudioClassification(ModelSpec spec, EncDecRecipe recipe)
      : EncoderDecoderModel(std::move(spec), std::move(recipe), Stacks::kEncoder) {
    AddLinear("projector", r_.proj_size, r_.d_model);
    AddLinear("classifier", r_.num_labels, r_.proj_size);
  }

  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor enc_blocked;
    return {Classify(w, Encode(w, inputs, &enc_blocked))};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    at::Tensor logits = Forward(w, batch.inputs)[0];
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    if (r_.num_labels == 1)
      return at::mse_loss(logits.squeeze(-1), labels.to(logits.scalar_type()));
    return CrossEntropy(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}));
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    return Seq2SeqBatch(r_, Seq2SeqHead::kAudioClassification, seed, batch_size, seq_len());
  }
};

class Wav2Vec2SequenceClassification : public Wav2Vec2Classifier {
 public:
  Wav2Vec2SequenceClassification(ModelSpec spec, Wav2Vec2Recipe recipe)
      : Wav2Vec2Classifier(std::move(spec), std::move(recipe)) {
    AddLinear("projector", r_.proj_size, r_.hidden);
    AddLinear("classifier", r_.num_labels, r_.proj_size);
  }

  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    return {Classify(w, States(w, inputs))};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    if (r_.num_labels == 1) {
      return at::mse_loss(out[0].squeeze(-1), labels.to(out[0].scalar_type()));
    }
    return CrossEntropy(out[0], labels);
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    Batch batch;
    batch.inputs[InputName()] = InputValues(gen, batch_size);
    batch.labels["labels"] =
        r_.num_labels == 1 ? at::randn({batch_size}, gen, at::TensorOptions().dtype(at::kFloat))
                           : at::randint(0, r_.num_labels, {batch_size}, gen,
                                         at::TensorOptions().dtype(at::kLong));
    return batch;
  }
};

// Wav2Vec2ForAudioFrameClassification (modeling_wav2vec2.py): `classifier` on every frame's
// state, logits [B, frames, num_labels]; transformers' loss is
// CrossEntropyLoss(logits.view(-1, L), argmax(labels.view(-1, L), axis=1)) over every frame of
// one-hot labels, so here the labels are one class index per frame.
class Wav2Vec2FrameClassification : public Wav2Vec2Classifier {
 public:
  Wav2Vec2FrameClassification(ModelSpec spec, Wav2Vec2Recipe recipe)
      : Wav2Vec2Classifier(std::move(spec), std::move(recipe)) {
    AddLinear("classifier", r_.num_labels, r_.hidden);
  }

  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    return {Lin(w, "classifier", States(w, inputs))};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    at::Tensor logits = Forward(w, batch.inputs)[0];
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    return CrossEntropy(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}));
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    Batch batch;
    batch.inputs[InputName()] = InputValues(gen, batch_size);
    batch.labels["labels"] = at::randint(0, r_.num_labels, {batch_size, kW2vFrames}, gen,
                                         at::TensorOptions().dtype(at::kLong));
    return batch;
  }
};

}  // namespace

std::unique_ptr<Model> MakeWhisperAudioClassification(ModelSpec spec, EncDecRecipe recipe) {
  return std::make_unique<WhisperAudioClassification>(std::move(spec), std::move(recipe));
}

std::unique_ptr<Model> MakeWav2Vec2SequenceClassification(ModelSpec spec, Wav2Vec2Recipe recipe) {
  return std::make_unique<Wav2Vec2SequenceClassification>(std::move(spec), std::move(recipe));
}

std::unique_ptr<Model> MakeWav2Vec2FrameClassification(ModelSpec spec, Wav2Vec2Recipe recipe) {
  return std::make_unique<Wav2Vec2FrameClassification>(std::move(spec), std::move(recipe));
}

}  // namespace ts::zoo::internal
