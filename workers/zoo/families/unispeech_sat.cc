// unispeech-sat (modular_unispeech_sat.py): wav2vec2's model and heads under `unispeech_sat.`,
// masked_spec_embed always present; modelled on microsoft/unispeech-sat-base.
#include "workers/zoo/families/wav2vec2.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

std::vector<ArchEntry> UniSpeechSatArchs() {
  std::vector<ArchEntry> v;
  json sat = Wav2Vec2Example();
  sat["num_clusters"] = 504;
  json sat_ctc = sat;
  sat_ctc["ctc_loss_reduction"] = "mean";
  v.push_back(Wav2Vec2Entry("UniSpeechSatModel", "feature-extraction", MakeWav2Vec2Base, sat,
                            "unispeech-sat"));
  v.push_back(Wav2Vec2Entry("UniSpeechSatForCTC", "automatic-speech-recognition", MakeWav2Vec2Ctc,
                            sat_ctc, "unispeech-sat"));
  v.push_back(Wav2Vec2Entry("UniSpeechSatForSequenceClassification", "audio-classification",
                            MakeWav2Vec2SequenceClassification, sat, "unispeech-sat"));
  v.push_back(Wav2Vec2Entry("UniSpeechSatForAudioFrameClassification", "audio-frame-classification",
                            MakeWav2Vec2FrameClassification, sat, "unispeech-sat"));
  return v;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(UniSpeechSat, UniSpeechSatArchs);

}  // namespace ts::zoo::internal
