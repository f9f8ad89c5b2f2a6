// wavlm (modular_wavlm.py): wav2vec2's feature encoder, projection and weight-normed positional
// conv (wav2vec2.cc) under `wavlm.`, with WavLMAttention in every encoder layer: a relative
// position bias from layer 0's `rel_attn_embed` [num_buckets, heads] at T5-style bidirectional
// buckets (num_buckets / 2 per direction, half of them exact, the rest logarithmic up to
// max_bucket_distance), shared by every layer and gated per layer and head from the layer's
// input (gru_rel_pos_linear [8, head_dim] summed in pairs of four, sigmoid, a * (b *
// gru_rel_pos_const - 1) + 2), added to the scaled q k^T; post-LN or do_stable_layer_norm
// pre-LN. Classes: Model, ForCTC, ForSequenceClassification, ForAudioFrameClassification,
// ForXVector. Modelled on microsoft/wavlm-base-plus.
#include "workers/zoo/families/wav2vec2.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

const Wav2Vec2Family kWavLm = {
    .model_type = "wavlm", .base = "wavlm.", .ctc_reduction = "mean", .wavlm = true};

json WavLmExample() {  // microsoft/wavlm-base-plus
  json c = Wav2Vec2Example();
  c["model_type"] = "wavlm";
  c["num_buckets"] = 320;
  c["max_bucket_distance"] = 800;
  c["mask_time_prob"] = 0.05;
  c.erase("ctc_loss_reduction");  // WavLMConfig's default: "mean"
  return c;
}

std::vector<ArchEntry> WavLmArchs() {
  const json example = WavLmExample();
  std::vector<ArchEntry> v;
  v.push_back(Wav2Vec2Entry(kWavLm, "WavLMModel", "feature-extraction", MakeWav2Vec2Base, example));
  v.push_back(Wav2Vec2Entry(kWavLm, "WavLMForCTC", "automatic-speech-recognition", MakeWav2Vec2Ctc,
                            example));
  v.push_back(Wav2Vec2Entry(kWavLm, "WavLMForSequenceClassification", "audio-classification",
                            MakeWav2Vec2SequenceClassification, example));
  v.push_back(Wav2Vec2Entry(kWavLm, "WavLMForAudioFrameClassification",
                            "audio-frame-classification", MakeWav2Vec2FrameClassification,
                            example));
  v.push_back(Wav2Vec2Entry(kWavLm, "WavLMForXVector", "audio-xvector", MakeWav2Vec2XVector,
                            XVectorExample(example)));
  return v;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(WavLm, WavLmArchs);

}  // namespace ts::zoo::internal
