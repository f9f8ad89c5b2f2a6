// Base head over wav2vec2's encoder (Wav2Vec2Model, no prefix): outputs last_hidden_state and
// extract_features; transformers gives it no loss, so the loss is the MSE of the states onto a
// random `target` plus the mean square of the extracted features.
#include <ATen/CPUGeneratorImpl.h>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/audio_heads.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

class Wav2Vec2Base : public Wav2Vec2Trunk {
 public:
  Wav2Vec2Base(ModelSpec spec, Wav2Vec2Recipe recipe)
      : Wav2Vec2Trunk(std::move(spec), std::move(recipe), "") {}

  std::vector<std::string> OutputNames() const override {
    if (!r_.extract_features_output) return {"last_hidden_state"};
    return {"last_hidden_state", "extract_features"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    auto [hs, feats] = Encode(w, inputs);
    if (!r_.extract_features_output) return {hs};
    return {hs, feats};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    at::Tensor loss =
        (out[0] - GetInput(batch.labels, "target").to(out[0].scalar_type())).pow(2).mean();
    return out.size() > 1 ? loss + out[1].pow(2).mean() : loss;
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    Batch batch;
    batch.inputs[InputName()] = InputValues(gen, batch_size);
    batch.labels["target"] = at::randn({batch_size, r_.OutFrames(kW2vFrames), r_.OutWidth()}, gen,
                                       at::TensorOptions().dtype(at::kFloat));
    return batch;
  }
};

}  // namespace

std::unique_ptr<Model> MakeWav2Vec2Base(ModelSpec spec, Wav2Vec2Recipe recipe) {
  return std::make_unique<Wav2Vec2Base>(std::move(spec), std::move(recipe));
}

}  // namespace ts::zoo::internal
