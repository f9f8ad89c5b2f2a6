// wav2vec2-bert (modular_wav2vec2_bert.py): no conv feature encoder; input_features [B, frames,
// feature_projection_input_dim] (stacked fbank frames, 160 by default) through
// Wav2Vec2BertFeatureProjection (`feature_projection.layer_norm`, `projection`) under
// `wav2vec2_bert.`, then the conformer blocks of trunks/audio_conformer.cc as
// Wav2Vec2BertEncoderLayer builds them: LayerNorms at layer_norm_eps, the convolution module's
// depthwise conv padded causally (kernel - 1 frames on the left) and normed by
// `depthwise_layer_norm` instead of a BatchNorm, and no final encoder norm; positions
// relative_key (the default: Shaw-style, `distance_embedding` [left_max + right_max + 1, head
// size] at the key - query distance clamped to [-left_max_position_embeddings,
// right_max_position_embeddings], q . E / sqrt(d) added to the scores), rotary (its inv_freq not
// persistent), relative or null. Classes: Model (with extract_features: the normed features),
// ForCTC, ForSequenceClassification, ForAudioFrameClassification, ForXVector. The adapter
// (add_adapter, use_intermediate_ffn_before_adapter) is refused naming the field. Modelled on
// facebook/w2v-bert-2.0.
#include "workers/zoo/families/wav2vec2.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

const Wav2Vec2Family kBert = {.model_type = "wav2vec2-bert",
                              .base = "wav2vec2_bert.",
                              .ctc_reduction = "sum",
                              .conformer = true,
                              .bert = true};

json BertExample() {  // facebook/w2v-bert-2.0
  return {{"model_type", "wav2vec2-bert"},
          {"hidden_size", 1024},
          {"num_hidden_layers", 24},
          {"num_attention_heads", 16},
          {"intermediate_size", 4096},
          {"feature_projection_input_dim", 160},
          {"hidden_act", "swish"},
          {"layer_norm_eps", 1e-5},
          {"position_embeddings_type", "relative_key"},
          {"left_max_position_embeddings", 64},
          {"right_max_position_embeddings", 8},
          {"rotary_embedding_base", 10000},
          {"max_source_positions", 5000},
          {"conv_depthwise_kernel_size", 31},
          {"add_adapter", false},
          {"use_intermediate_ffn_before_adapter", false},
          {"mask_time_prob", 0.05},
          {"vocab_size", 32},
          {"pad_token_id", 0},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"classifier_proj_size", 768},
          {"initializer_range", 0.02}};
}

std::vector<ArchEntry> Wav2Vec2BertArchs() {
  const json example = BertExample();
  json ctc = example;
  ctc["ctc_loss_reduction"] = "mean";  // as transformers' CTC fine-tuning recipe writes it
  std::vector<ArchEntry> v;
  v.push_back(
      Wav2Vec2Entry(kBert, "Wav2Vec2BertModel", "feature-extraction", MakeWav2Vec2Base, example));
  v.push_back(Wav2Vec2Entry(kBert, "Wav2Vec2BertForCTC", "automatic-speech-recognition",
                            MakeWav2Vec2Ctc, ctc));
  v.push_back(Wav2Vec2Entry(kBert, "Wav2Vec2BertForSequenceClassification", "audio-classification",
                            MakeWav2Vec2SequenceClassification, example));
  v.push_back(Wav2Vec2Entry(kBert, "Wav2Vec2BertForAudioFrameClassification",
                            "audio-frame-classification", MakeWav2Vec2FrameClassification,
                            example));
  v.push_back(Wav2Vec2Entry(kBert, "Wav2Vec2BertForXVector", "audio-xvector", MakeWav2Vec2XVector,
                            XVectorExample(example)));
  return v;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Wav2Vec2Bert, Wav2Vec2BertArchs);

}  // namespace ts::zoo::internal
