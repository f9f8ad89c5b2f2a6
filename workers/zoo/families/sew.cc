// sew (modular_sew.py): wav2vec2's feature encoder (wav2vec2.cc) under `sew.`, then SEWModel's
// `layer_norm` over the conv features and a bare `feature_projection` Linear only when
// conv_dim[-1] != hidden_size; SEWEncoder squeezes the sequence: the weight-normed positional
// conv with stride squeeze_factor (same padding, the even kernel's last frame dropped,
// feat_extract_activation) added to AvgPool1d(squeeze_factor) of the states, cut to the shorter
// of the two, `encoder.layer_norm`, post-LN Wav2Vec2EncoderLayers at the pooled rate, then
// SEWUpsampling (`encoder.upsample.projection` to hidden_size * squeeze_factor,
// feat_extract_activation, each frame's channels unfolded into squeeze_factor frames, zero-padded
// to the input's frames); trunks/audio.cc SewEncode. SEWModel returns last_hidden_state only;
// SEWForCTC and SEWForSequenceClassification are Wav2Vec2's heads. Modelled on SEWConfig's
// defaults (the asapp/sew-tiny-100k layout its docstring names: 13 feature convs).
#include "workers/zoo/families/wav2vec2.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

const Wav2Vec2Family kSew = {
    .model_type = "sew", .base = "sew.", .extract_features_output = false, .sew = true};

json SewExample() {
  json c = Wav2Vec2Example();
  c["model_type"] = "sew";
  c["squeeze_factor"] = 2;
  c["conv_dim"] = {64, 128, 128, 128, 128, 256, 256, 256, 256, 512, 512, 512, 512};
  c["conv_stride"] = {5, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1};
  c["conv_kernel"] = {10, 3, 1, 3, 1, 3, 1, 3, 1, 2, 1, 2, 1};
  c["mask_time_prob"] = 0.05;
  c.erase("do_stable_layer_norm");  // SEWEncoder never reads it
  return c;
}

std::vector<ArchEntry> SewArchs() {
  const json example = SewExample();
  json ctc = example;
  ctc["ctc_loss_reduction"] = "mean";  // as transformers' CTC fine-tuning recipe writes it
  std::vector<ArchEntry> v;
  v.push_back(Wav2Vec2Entry(kSew, "SEWModel", "feature-extraction", MakeWav2Vec2Base, example));
  v.push_back(
      Wav2Vec2Entry(kSew, "SEWForCTC", "automatic-speech-recognition", MakeWav2Vec2Ctc, ctc));
  v.push_back(Wav2Vec2Entry(kSew, "SEWForSequenceClassification", "audio-classification",
                            MakeWav2Vec2SequenceClassification, example));
  return v;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Sew, SewArchs);

}  // namespace ts::zoo::internal
