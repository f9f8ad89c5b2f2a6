// data2vec-audio (modular_data2vec_audio.py): wav2vec2's model and heads (wav2vec2.cc) under
// `data2vec_audio.`, with every feature-encoder conv layer-normed (Data2VecAudioConvLayer; the
// config has no feat_extract_norm) and a positional embedding of num_conv_pos_embeddings stacked
// convs (Data2VecAudioPositionalConvLayer: conv of conv_pos_kernel_size, groups
// num_conv_pos_embedding_groups, same padding, the even kernel's last frame dropped, a LayerNorm
// without parameters, feat_extract_activation) in place of the weight-normed one; the post-LN
// encoder (Wav2Vec2Encoder). Classes: Model, ForCTC, ForSequenceClassification,
// ForAudioFrameClassification, ForXVector. Modelled on facebook/data2vec-audio-base-960h.
#include "workers/zoo/families/wav2vec2.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

const Wav2Vec2Family kData2VecAudio = {
    .model_type = "data2vec-audio", .base = "data2vec_audio.", .stacked_pos_conv = true};

json Data2VecAudioExample() {  // facebook/data2vec-audio-base-960h
  json c = Wav2Vec2Example();
  c["model_type"] = "data2vec-audio";
  c.erase("feat_extract_norm");
  c.erase("do_stable_layer_norm");
  c["num_conv_pos_embeddings"] = 5;
  c["conv_pos_kernel_size"] = 19;
  c["mask_time_prob"] = 0.05;
  return c;
}

std::vector<ArchEntry> Data2VecAudioArchs() {
  const json example = Data2VecAudioExample();
  std::vector<ArchEntry> v;
  v.push_back(Wav2Vec2Entry(kData2VecAudio, "Data2VecAudioModel", "feature-extraction",
                            MakeWav2Vec2Base, example));
  v.push_back(Wav2Vec2Entry(kData2VecAudio, "Data2VecAudioForCTC", "automatic-speech-recognition",
                            MakeWav2Vec2Ctc, example));
  v.push_back(Wav2Vec2Entry(kData2VecAudio, "Data2VecAudioForSequenceClassification",
                            "audio-classification", MakeWav2Vec2SequenceClassification, example));
  v.push_back(Wav2Vec2Entry(kData2VecAudio, "Data2VecAudioForAudioFrameClassification",
                            "audio-frame-classification", MakeWav2Vec2FrameClassification,
                            example));
  v.push_back(Wav2Vec2Entry(kData2VecAudio, "Data2VecAudioForXVector", "audio-xvector",
                            MakeWav2Vec2XVector, XVectorExample(example)));
  return v;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Data2VecAudio, Data2VecAudioArchs);

}  // namespace ts::zoo::internal
