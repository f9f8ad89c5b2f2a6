// The heads over wav2vec2's encoder (trunks/audio.h), as families/wav2vec2.cc builds them. Each
// holds its weights, output names, loss and batch (input_values, then its labels).
#pragma once

#include <memory>

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

}  // namespace ts::zoo::internal
