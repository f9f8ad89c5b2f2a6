// The heads over wav2vec2's encoder (trunks/audio.h), as the wav2vec2 lineage's families
// (families/wav2vec2.h) build them. Each holds its weights, output names, loss and batch
// (input_values, then its labels).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/model.h"
#include "workers/zoo/trunks/audio.h"

namespace ts::zoo::internal {

// audio_base.cc: Wav2Vec2Model.
std::unique_ptr<Model> MakeWav2Vec2Base(ModelSpec spec, Wav2Vec2Recipe recipe);
// ctc.cc: Wav2Vec2ForCTC.
std::unique_ptr<Model> MakeWav2Vec2Ctc(ModelSpec spec, Wav2Vec2Recipe recipe);
// audio_classification.cc: Wav2Vec2ForSequenceClassification.
std::unique_ptr<Model> MakeWav2Vec2SequenceClassification(ModelSpec spec, Wav2Vec2Recipe recipe);
// audio_classification.cc: Wav2Vec2ForAudioFrameClassification.
std::unique_ptr<Model> MakeWav2Vec2FrameClassification(ModelSpec spec, Wav2Vec2Recipe recipe);
// xvector.cc: Wav2Vec2ForXVector.
std::unique_ptr<Model> MakeWav2Vec2XVector(ModelSpec spec, Wav2Vec2Recipe recipe);

// The states a wav2vec2 classifier reads: the last hidden state, or with use_weighted_layer_sum
// (transformers' Wav2Vec2ForSequenceClassification / ForAudioFrameClassification.forward) the
// hidden states stacked on dim 1, times softmax(layer_weights).view(-1, 1, 1), summed.
class Wav2Vec2Classifier : public Wav2Vec2Trunk {
 protected:
  Wav2Vec2Classifier(ModelSpec spec, Wav2Vec2Recipe recipe)
      : Wav2Vec2Trunk(std::move(spec), recipe, recipe.base) {
    if (r_.weighted_layer_sum) Add("layer_weights", {r_.layers + 1});
  }

  at::Tensor States(const WeightMap& w, const TensorMap& inputs) const {
    if (!r_.weighted_layer_sum) return Encode(w, inputs).first;
    std::vector<at::Tensor> all;
    Encode(w, inputs, &all);
    at::Tensor norm = at::softmax(GetWeight(w, "layer_weights"), -1).view({-1, 1, 1});
    return (at::stack(all, 1) * norm).sum(1);
  }

  // layer_weights start at 1 / (num_hidden_layers + 1), as transformers initialises them.
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (name == "layer_weights") {
      t.fill_(1.0 / static_cast<double>(r_.layers + 1));
      return;
    }
    Wav2Vec2Trunk::InitWeight(name, t, gen);
  }
};

}  // namespace ts::zoo::internal
