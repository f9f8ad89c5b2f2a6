// unispeech (modular_unispeech.py): wav2vec2's feature encoder, projection, encoders and
// CTC / sequence-classification heads under `unispeech.`, no adapter; UniSpeechForPreTraining's
// quantizer, project_q / project_hid and ctc_proj are not built (the class is not registered).
// Modelled on microsoft/unispeech-large-1500h-cv (layer-normed convs with bias, stable layer
// norm).
#include "workers/zoo/families/wav2vec2.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

const Wav2Vec2Family kUniSpeech = {
    .model_type = "unispeech", .base = "unispeech.", .ctc_reduction = "mean"};

std::vector<ArchEntry> UniSpeechArchs() {
  std::vector<ArchEntry> v;
  json uni = Wav2Vec2Example();
  uni["hidden_size"] = 1024;
  uni["num_hidden_layers"] = 24;
  uni["num_attention_heads"] = 16;
  uni["intermediate_size"] = 4096;
  uni["feat_extract_norm"] = "layer";
  uni["do_stable_layer_norm"] = true;
  uni["conv_bias"] = true;
  uni["num_ctc_classes"] = 80;
  uni["replace_prob"] = 0.5;
  uni.erase("ctc_loss_reduction");  // UniSpeechConfig's default: "mean"
  v.push_back(
      Wav2Vec2Entry(kUniSpeech, "UniSpeechModel", "feature-extraction", MakeWav2Vec2Base, uni));
  v.push_back(Wav2Vec2Entry(kUniSpeech, "UniSpeechForCTC", "automatic-speech-recognition",
                            MakeWav2Vec2Ctc, uni));
  v.push_back(Wav2Vec2Entry(kUniSpeech, "UniSpeechForSequenceClassification",
                            "audio-classification", MakeWav2Vec2SequenceClassification, uni));
  return v;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(UniSpeech, UniSpeechArchs);

}  // namespace ts::zoo::internal
