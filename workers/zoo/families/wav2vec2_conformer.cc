// wav2vec2-conformer (modular_wav2vec2_conformer.py): wav2vec2's feature encoder and feature
// projection (wav2vec2.cc) under `wav2vec2_conformer.`, then Wav2Vec2ConformerEncoder's conformer
// blocks (trunks/audio_conformer.cc) with rotary or relative (Transformer-XL) positions, or none
// (position_embeddings_type null), and `encoder.layer_norm` after them. transformers builds the
// encoder's `pos_conv_embed` and never calls it: its parameters are state_dict entries here, not
// weights (they would have no gradient), as is the rotary's persistent `inv_freq` buffer.
// Classes: Model (with extract_features), ForCTC, ForSequenceClassification,
// ForAudioFrameClassification, ForXVector; Wav2Vec2ConformerForPreTraining is left out as
// Wav2Vec2ForPreTraining is (FIDELITY.md). Modelled on
// facebook/wav2vec2-conformer-rope-large-960h-ft (rotary) and
// facebook/wav2vec2-conformer-rel-pos-large (relative).
#include <ATen/ATen.h>

#include "workers/zoo/families/wav2vec2.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

const Wav2Vec2Family kConformer = {.model_type = "wav2vec2-conformer",
                                   .base = "wav2vec2_conformer.",
                                   .ctc_reduction = "sum",
                                   .conformer = true};

int64_t ConformerIntField(const json& c, const char* name, int64_t def) {
  auto it = c.find(name);
  return it != c.end() && it->is_number_integer() ? it->get<int64_t>() : def;
}

// The unused positional conv (Wav2Vec2PositionalConvEmbedding: weight-normed, grouped) and, for
// the rotary, inv_freq = 1 / base^(arange(0, head_dim, 2) / head_dim) in float32.
void AddConformerBuffers(StateDictBuilder& sd) {
  const json& c = sd.model().spec().tiny_config;
  const std::string anchor = "encoder.layer_norm.weight";
  std::string prefix;
  for (const auto& [n, s] : sd.weights()) {
    if (n.size() >= anchor.size() &&
        n.compare(n.size() - anchor.size(), anchor.size(), anchor) == 0)
      prefix = n.substr(0, n.size() - anchor.size()) + "encoder.";
  }
  const int64_t h = ConformerIntField(c, "hidden_size", 768),
                heads = ConformerIntField(c, "num_attention_heads", 12);
  const int64_t k = ConformerIntField(c, "num_conv_pos_embeddings", 128);
  const int64_t groups = ConformerIntField(c, "num_conv_pos_embedding_groups", 16);
  auto type = c.find("position_embeddings_type");
  if (type != c.end() && type->is_string() && type->get<std::string>() == "rotary") {
    const int64_t hd = h / heads;
    const double base = c.value("rotary_embedding_base", 10000.0);
    at::Tensor inv = 1.0 / at::pow(base, at::arange(0, hd, 2, at::kLong).to(at::kFloat) /
                                             static_cast<double>(hd));
    at::Tensor d = inv.to(at::kDouble).contiguous();
    StateDictEntry e{prefix + "embed_positions.inv_freq", {hd / 2}, at::kFloat, ""};
    e.values.assign(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
    sd.Add(std::move(e));
  }
  const std::string pc = prefix + "pos_conv_embed.conv.";
  sd.AddUnused(pc + "bias", {h});
  sd.AddUnused(pc + "parametrizations.weight.original0", {1, 1, k});
  sd.AddUnused(pc + "parametrizations.weight.original1", {h, h / groups, k});
}

ArchEntry ConformerEntry(const std::string& arch, const char* task, Wav2Vec2MakeFn make,
                         const json& example) {
  ArchEntry e = Wav2Vec2Entry(kConformer, arch, task, make, example);
  auto masked_spec_embed = e.state_dict.extra;
  e.state_dict.extra = [masked_spec_embed](StateDictBuilder& sd) {
    AddConformerBuffers(sd);
    masked_spec_embed(sd);
  };
  return e;
}

json ConformerExample() {  // facebook/wav2vec2-conformer-rope-large-960h-ft
  json c = Wav2Vec2Example();
  c["model_type"] = "wav2vec2-conformer";
  c["hidden_size"] = 1024;
  c["num_hidden_layers"] = 24;
  c["num_attention_heads"] = 16;
  c["intermediate_size"] = 4096;
  c["hidden_act"] = "swish";
  c["feat_extract_norm"] = "layer";
  c["conv_bias"] = true;
  c["position_embeddings_type"] = "rotary";
  c["rotary_embedding_base"] = 10000;
  c["conv_depthwise_kernel_size"] = 31;
  c["max_source_positions"] = 5000;
  c["mask_time_prob"] = 0.05;
  c.erase("do_stable_layer_norm");  // Wav2Vec2ConformerConfig has none
  return c;
}

std::vector<ArchEntry> Wav2Vec2ConformerArchs() {
  const json example = ConformerExample();
  json ctc = example;
  ctc["ctc_loss_reduction"] = "mean";  // as transformers' CTC fine-tuning recipe writes it
  // facebook/wav2vec2-conformer-rel-pos-large: the relative positions of the config's default.
  json relative = example;
  relative["position_embeddings_type"] = "relative";
  relative["hidden_act"] = "gelu";
  std::vector<ArchEntry> v;
  v.push_back(
      ConformerEntry("Wav2Vec2ConformerModel", "feature-extraction", MakeWav2Vec2Base, relative));
  v.push_back(ConformerEntry("Wav2Vec2ConformerForCTC", "automatic-speech-recognition",
                             MakeWav2Vec2Ctc, ctc));
  v.push_back(ConformerEntry("Wav2Vec2ConformerForSequenceClassification", "audio-classification",
                             MakeWav2Vec2SequenceClassification, example));
  v.push_back(ConformerEntry("Wav2Vec2ConformerForAudioFrameClassification",
                             "audio-frame-classification", MakeWav2Vec2FrameClassification,
                             relative));
  v.push_back(ConformerEntry("Wav2Vec2ConformerForXVector", "audio-xvector", MakeWav2Vec2XVector,
                             XVectorExample(example)));
  return v;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Wav2Vec2Conformer, Wav2Vec2ConformerArchs);

}  // namespace ts::zoo::internal
