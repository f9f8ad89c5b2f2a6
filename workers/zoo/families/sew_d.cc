// sew-d (modular_sew_d.py): SEW (sew.cc) under `sew_d.` with DeBERTa-v2's encoder between the
// squeeze and the upsampling (trunks/audio_sew_d.cc): SEWDEncoder adds the strided positional
// conv to the average-pooled states (no layer norm there), SEWDTransformerEncoder's layers
// (disentangled c2p / p2c attention over log-bucketed relative positions, the shared
// rel_embeddings LayerNorm-ed, share_att_key), SEWUpsampling; SEWDModel's feature layer_norm at
// feature_layer_norm_eps, the layers' at layer_norm_eps (1e-7 by default). SEWDModel returns
// last_hidden_state only; SEWDForCTC and SEWDForSequenceClassification are Wav2Vec2's heads.
// Modelled on SEWDConfig's defaults (the asapp/sew-d-tiny-100k layout its docstring names).
#include "workers/zoo/families/wav2vec2.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

const Wav2Vec2Family kSewD = {.model_type = "sew-d",
                              .base = "sew_d.",
                              .extract_features_output = false,
                              .ctc_reduction = "mean",
                              .sew = true,
                              .sew_d = true};

json SewDExample() {
  json c = Wav2Vec2Example();
  c["model_type"] = "sew-d";
  c["squeeze_factor"] = 2;
  c["conv_dim"] = {64, 128, 128, 128, 128, 256, 256, 256, 256, 512, 512, 512, 512};
  c["conv_stride"] = {5, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1};
  c["conv_kernel"] = {10, 3, 1, 3, 1, 3, 1, 3, 1, 2, 1, 2, 1};
  c["max_position_embeddings"] = 512;
  c["position_buckets"] = 256;
  c["share_att_key"] = true;
  c["relative_attention"] = true;
  c["pos_att_type"] = {"p2c", "c2p"};
  c["norm_rel_ebd"] = "layer_norm";
  c["hidden_act"] = "gelu_python";
  c["layer_norm_eps"] = 1e-7;
  c["feature_layer_norm_eps"] = 1e-5;
  c["mask_time_prob"] = 0.05;
  c.erase("do_stable_layer_norm");
  c.erase("ctc_loss_reduction");  // SEWDConfig's default: "mean"
  return c;
}

std::vector<ArchEntry> SewDArchs() {
  const json example = SewDExample();
  std::vector<ArchEntry> v;
  v.push_back(Wav2Vec2Entry(kSewD, "SEWDModel", "feature-extraction", MakeWav2Vec2Base, example));
  v.push_back(
      Wav2Vec2Entry(kSewD, "SEWDForCTC", "automatic-speech-recognition", MakeWav2Vec2Ctc, example));
  v.push_back(Wav2Vec2Entry(kSewD, "SEWDForSequenceClassification", "audio-classification",
                            MakeWav2Vec2SequenceClassification, example));
  return v;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(SewD, SewDArchs);

}  // namespace ts::zoo::internal
