// unispeech-sat (modular_unispeech_sat.py): wav2vec2's model and heads under `unispeech_sat.`,
// masked_spec_embed always present; modelled on microsoft/unispeech-sat-base. Classes: Model,
// ForCTC, ForSequenceClassification, ForAudioFrameClassification, ForXVector.
#include "workers/zoo/families/wav2vec2.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

const Wav2Vec2Family kUniSpeechSat = {
    .model_type = "unispeech-sat", .base = "unispeech_sat.", .always_masked_spec_embed = true};

std::vector<ArchEntry> UniSpeechSatArchs() {
  std::vector<ArchEntry> v;
  json sat = Wav2Vec2Example();
  sat["num_clusters"] = 504;
  json sat_ctc = sat;
  sat_ctc["ctc_loss_reduction"] = "mean";
  v.push_back(Wav2Vec2Entry(kUniSpeechSat, "UniSpeechSatModel", "feature-extraction",
                            MakeWav2Vec2Base, sat));
  v.push_back(Wav2Vec2Entry(kUniSpeechSat, "UniSpeechSatForCTC", "automatic-speech-recognition",
                            MakeWav2Vec2Ctc, sat_ctc));
  v.push_back(Wav2Vec2Entry(kUniSpeechSat, "UniSpeechSatForSequenceClassification",
                            "audio-classification", MakeWav2Vec2SequenceClassification, sat));
  v.push_back(Wav2Vec2Entry(kUniSpeechSat, "UniSpeechSatForAudioFrameClassification",
                            "audio-frame-classification", MakeWav2Vec2FrameClassification, sat));
  // microsoft/unispeech-sat-base-plus-sv
  v.push_back(Wav2Vec2Entry(kUniSpeechSat, "UniSpeechSatForXVector", "audio-xvector",
                            MakeWav2Vec2XVector, XVectorExample(sat)));
  return v;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(UniSpeechSat, UniSpeechSatArchs);

}  // namespace ts::zoo::internal
