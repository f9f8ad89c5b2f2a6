// hubert (modular_hubert.py): wav2vec2's encoder under `hubert.`, the feature projection's
// layer norm only with feat_proj_layer_norm, HubertModel without extract_features; modelled
// on facebook/hubert-base-ls960 (its CTC fine-tune: facebook/hubert-large-ls960-ft).
#include "workers/zoo/families/wav2vec2.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

const Wav2Vec2Family kHubert = {.model_type = "hubert",
                                .base = "hubert.",
                                .extract_features_output = false,
                                .hubert_projection = true};

std::vector<ArchEntry> HubertArchs() {
  std::vector<ArchEntry> v;
  json hubert = Wav2Vec2Example();
  hubert["feat_proj_layer_norm"] = true;
  hubert["conv_pos_batch_norm"] = false;
  json hubert_ctc = hubert;
  hubert_ctc["ctc_loss_reduction"] = "mean";  // as transformers' CTC fine-tuning writes it
  v.push_back(
      Wav2Vec2Entry(kHubert, "HubertModel", "feature-extraction", MakeWav2Vec2Base, hubert));
  v.push_back(Wav2Vec2Entry(kHubert, "HubertForCTC", "automatic-speech-recognition",
                            MakeWav2Vec2Ctc, hubert_ctc));
  v.push_back(Wav2Vec2Entry(kHubert, "HubertForSequenceClassification", "audio-classification",
                            MakeWav2Vec2SequenceClassification, hubert));
  return v;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Hubert, HubertArchs);

}  // namespace ts::zoo::internal
