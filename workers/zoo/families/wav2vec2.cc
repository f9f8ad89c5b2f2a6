// wav2vec2 (README.md), the lineage of hubert.cc, unispeech.cc and unispeech_sat.cc (wav2vec2.h):
// conv feature encoder (group norm on the first conv, or layer norm on
// each), feature projection, weight-normed grouped positional conv, post-LN (or
// `do_stable_layer_norm` pre-LN) transformer encoder. Classes: Model, ForCTC,
// ForSequenceClassification. (Model and ForCTC were left out while their device loss curve left
// the declared bf16 curve on the defect-free profile: the cause was at::group_norm, which a device
// runs as ATen's batch-norm decomposition and the CPU reference as its fused kernel; the trunk
// now writes the norm out, trunks/audio.cc ChannelGroupNorm.)
#include "workers/zoo/families/wav2vec2.h"

#include <algorithm>
#include <numeric>

#include "workers/zoo/config.h"
#include "workers/zoo/families/config_fields.h"
#include "workers/zoo/heads/audio_heads.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

using P = TinyProfile;
using json = nlohmann::json;

StatusOr<std::vector<int64_t>> IntList(const json& config, const std::string& field,
                                       std::vector<int64_t> def) {
  auto it = config.find(field);
  if (it == config.end() || it->is_null()) return def;
  if (!it->is_array()) {
    return InvalidArgumentError(field + ": expected array of integers, got " + JsonTypeName(*it));
  }
  std::vector<int64_t> out;
  for (const auto& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
      return InvalidArgumentError(field + ": expected array of positive integers");
    }
    out.push_back(v.get<int64_t>());
  }
  return out;
}

// `reads_norm` false: no feat_extract_norm field, every conv layer-normed (data2vec-audio).
Status ParseFeatureEncoder(const json& config, const ConfigReader& r, Wav2Vec2Recipe& c,
                           bool reads_norm) {
  TS_ASSIGN_OR_RETURN(c.conv_dim, IntList(config, "conv_dim", std::vector<int64_t>(7, 512)));
  TS_ASSIGN_OR_RETURN(c.conv_stride, IntList(config, "conv_stride", {5, 2, 2, 2, 2, 2, 2}));
  TS_ASSIGN_OR_RETURN(c.conv_kernel, IntList(config, "conv_kernel", {10, 3, 3, 3, 3, 2, 2}));
  if (c.conv_dim.empty()) return InvalidArgumentError("conv_dim: must not be empty");
  if (c.conv_stride.size() != c.conv_dim.size()) {
    return InvalidArgumentError("conv_stride: must have as many entries as conv_dim");
  }
  if (c.conv_kernel.size() != c.conv_dim.size()) {
    return InvalidArgumentError("conv_kernel: must have as many entries as conv_dim");
  }
  c.group_norm = false;
  if (reads_norm) {
    TS_ASSIGN_OR_RETURN(std::string norm, r.String("feat_extract_norm", "group"));
    if (norm != "group" && norm != "layer") {
      return r.Error("feat_extract_norm", "unknown '" + norm + "'");
    }
    c.group_norm = norm == "group";
  }
  TS_ASSIGN_OR_RETURN(c.conv_bias, r.Bool("conv_bias", false));
  return OkStatus();
}

// The x-vector head's sizes: tdnn_dim / tdnn_kernel / tdnn_dilation of one length, and a
// TDNN that leaves at least two of the run's frames (its statistic pooling takes a std).
Status ParseXVector(const json& config, const ConfigReader& r, Wav2Vec2Recipe& c) {
  TS_ASSIGN_OR_RETURN(c.tdnn_dim, IntList(config, "tdnn_dim", {512, 512, 512, 512, 1500}));
  TS_ASSIGN_OR_RETURN(c.tdnn_kernel, IntList(config, "tdnn_kernel", {5, 3, 3, 1, 1}));
  TS_ASSIGN_OR_RETURN(c.tdnn_dilation, IntList(config, "tdnn_dilation", {1, 2, 3, 1, 1}));
  if (c.tdnn_dim.empty()) return r.Error("tdnn_dim", "must not be empty");
  if (c.tdnn_kernel.size() != c.tdnn_dim.size())
    return r.Error("tdnn_kernel", "must have as many entries as tdnn_dim");
  if (c.tdnn_dilation.size() != c.tdnn_dim.size())
    return r.Error("tdnn_dilation", "must have as many entries as tdnn_dim");
  int64_t frames = kW2vFrames;
  for (size_t i = 0; i < c.tdnn_dim.size(); ++i)
    frames -= (c.tdnn_kernel[i] - 1) * c.tdnn_dilation[i];
  if (frames < 2) {
    return r.Error("tdnn_kernel", "the TDNN's receptive field leaves " + std::to_string(frames) +
                                      " of the run's " + std::to_string(kW2vFrames) + " frames");
  }
  TS_ASSIGN_OR_RETURN(c.xvector_dim, PositiveField(r, "xvector_output_dim", 512));
  return OkStatus();
}

// SEWConfig's squeeze_factor (SEWUpsampling reshapes hidden_size * squeeze_factor channels into
// squeeze_factor frames of hidden_size) and whether SEWModel projects its features.
Status ParseSew(const ConfigReader& r, Wav2Vec2Recipe& c) {
  TS_ASSIGN_OR_RETURN(c.squeeze, PositiveField(r, "squeeze_factor", 2));
  if (c.squeeze > kW2vFrames) {
    return r.Error("squeeze_factor", "above the run's " + std::to_string(kW2vFrames) + " frames");
  }
  if (c.hidden % c.squeeze != 0) return r.Error("squeeze_factor", "must divide hidden_size");
  c.sew_projection = c.conv_dim.back() != c.hidden;
  c.feat_proj_layer_norm = false;
  return OkStatus();
}

// Wav2Vec2ConformerConfig's (`bert`: Wav2Vec2BertConfig's) conformer fields; an even depthwise
// kernel is refused as Wav2Vec2ConformerConvolutionModule refuses it (its same padding needs an
// odd one).
Status ParseConformer(const json& config, const ConfigReader& r, Wav2Vec2Recipe& c, bool bert) {
  c.conformer = true;
  auto it = config.find("position_embeddings_type");
  if (it == config.end()) {
    c.conformer_pos = bert ? ConformerPos::kRelativeKey : ConformerPos::kRelative;
  } else if (it->is_null()) {
    c.conformer_pos = ConformerPos::kNone;
  } else {
    TS_ASSIGN_OR_RETURN(std::string type, r.String("position_embeddings_type", "relative"));
    if (type == "rotary") {
      c.conformer_pos = ConformerPos::kRotary;
    } else if (type == "relative") {
      c.conformer_pos = ConformerPos::kRelative;
    } else if (type == "relative_key" && bert) {
      c.conformer_pos = ConformerPos::kRelativeKey;
    } else {
      return r.Error("position_embeddings_type", "unknown '" + type + "'");
    }
  }
  if (c.conformer_pos == ConformerPos::kRotary && (c.hidden / c.heads) % 2 != 0) {
    return r.Error("num_attention_heads", "the rotary needs an even head size");
  }
  TS_ASSIGN_OR_RETURN(c.rotary_base, r.Double("rotary_embedding_base", 10000.0));
  if (c.rotary_base <= 0) return r.Error("rotary_embedding_base", "must be positive");
  TS_ASSIGN_OR_RETURN(c.depthwise_kernel, PositiveField(r, "conv_depthwise_kernel_size", 31));
  if (c.depthwise_kernel % 2 == 0) {
    return r.Error("conv_depthwise_kernel_size", "must be odd (same padding)");
  }
  if (c.conformer_pos == ConformerPos::kRelativeKey) {
    TS_ASSIGN_OR_RETURN(c.left_max, r.Int("left_max_position_embeddings", 64));
    TS_ASSIGN_OR_RETURN(c.right_max, r.Int("right_max_position_embeddings", 8));
    if (c.left_max < 0) return r.Error("left_max_position_embeddings", "must not be negative");
    if (c.right_max < 0) return r.Error("right_max_position_embeddings", "must not be negative");
  }
  return OkStatus();
}

// The conv feature encoder's activation and the positional conv(s): wav2vec2's one weight-normed
// conv, or data2vec-audio's stacked ones.
Status ParsePositionalConv(const ConfigReader& r, const Wav2Vec2Family& fam, Wav2Vec2Recipe& c) {
  TS_ASSIGN_OR_RETURN(std::string fa, r.String("feat_extract_activation", "gelu"));
  TS_ASSIGN_OR_RETURN(c.feat_act, ParseActivation(fa, "feat_extract_activation"));
  if (fam.stacked_pos_conv) {
    TS_ASSIGN_OR_RETURN(c.pos_conv_layers, PositiveField(r, "num_conv_pos_embeddings", 5));
    TS_ASSIGN_OR_RETURN(c.pos_kernel, PositiveField(r, "conv_pos_kernel_size", 19));
  } else {
    TS_ASSIGN_OR_RETURN(c.pos_kernel, PositiveField(r, "num_conv_pos_embeddings", 128));
  }
  TS_ASSIGN_OR_RETURN(c.pos_groups, PositiveField(r, "num_conv_pos_embedding_groups", 16));
  if (c.hidden % c.pos_groups != 0) {
    return r.Error("num_conv_pos_embedding_groups", "must divide hidden_size");
  }
  return OkStatus();
}

// Wav2Vec2BertConfig's adapter (`adapter_ok`: the class is the Model or ForCTC; transformers'
// sequence and frame classifiers refuse an adapter, and the x-vector head is not built over one).
Status ParseBertAdapter(const json& config, const ConfigReader& r, Wav2Vec2Recipe& c,
                        bool adapter_ok) {
  TS_ASSIGN_OR_RETURN(c.adapter, r.Bool("add_adapter", false));
  TS_ASSIGN_OR_RETURN(c.intermediate_ffn, r.Bool("use_intermediate_ffn_before_adapter", false));
  if (c.intermediate_ffn && !c.adapter) {
    return r.Error("use_intermediate_ffn_before_adapter",
                   "true needs add_adapter (as transformers)");
  }
  if (!c.adapter) return OkStatus();
  if (!adapter_ok) return r.Error("add_adapter", "true is not supported by this head");
  c.out_hidden = c.hidden;
  if (auto it = config.find("output_hidden_size"); it != config.end() && !it->is_null()) {
    TS_ASSIGN_OR_RETURN(c.out_hidden, PositiveField(r, "output_hidden_size", c.hidden));
  }
  if (c.out_hidden % c.heads != 0) {
    return r.Error("output_hidden_size", "must be a multiple of num_attention_heads");
  }
  TS_ASSIGN_OR_RETURN(c.adapter_kernel, PositiveField(r, "adapter_kernel_size", 3));
  TS_ASSIGN_OR_RETURN(c.adapter_stride, PositiveField(r, "adapter_stride", 2));
  TS_ASSIGN_OR_RETURN(c.adapter_layers, PositiveField(r, "num_adapter_layers", 1));
  TS_ASSIGN_OR_RETURN(std::string act, r.String("adapter_act", "relu"));
  TS_ASSIGN_OR_RETURN(c.adapter_act, ParseActivation(act, "adapter_act"));
  if (c.OutFrames(kW2vFrames) < kW2vFrames / 4) {
    return r.Error("num_adapter_layers", "leaves fewer frames than the run's CTC labels");
  }
  return OkStatus();
}

// Wav2Vec2BertConfig's input and one label (its heads' loss is cross entropy whatever num_labels
// says, so a single label would train on a constant).
Status ParseBert(const json& config, const ConfigReader& r, Wav2Vec2Recipe& c, bool adapter_ok) {
  TS_ASSIGN_OR_RETURN(c.feature_input_dim, PositiveField(r, "feature_projection_input_dim", 160));
  TS_RETURN_IF_ERROR(ParseBertAdapter(config, r, c, adapter_ok));
  TS_ASSIGN_OR_RETURN(int64_t labels, ParseNumLabels(config));
  if (labels == 1) return r.Error("num_labels", "1: Wav2Vec2Bert's heads take cross entropy");
  return OkStatus();
}

// SEWDConfig's DeBERTa-v2 fields. pos_att_type is a list (SEWDConfig keeps list(pos_att_type): a
// string would become its characters); norm_rel_ebd "|"-separated; a ConvLayer
// (conv_kernel_size > 0) is refused.
Status ParseSewD(const json& config, const ConfigReader& r, Wav2Vec2Recipe& c) {
  c.sew_d = true;
  TS_ASSIGN_OR_RETURN(c.relative, r.Bool("relative_attention", true));
  TS_ASSIGN_OR_RETURN(c.share_att_key, r.Bool("share_att_key", true));
  c.c2p = c.p2c = true;
  if (auto it = config.find("pos_att_type"); it != config.end() && !it->is_null()) {
    if (!it->is_array()) return r.Error("pos_att_type", "expected an array of \"c2p\" / \"p2c\"");
    c.c2p = c.p2c = false;
    for (const json& k : *it) {
      const std::string kind = k.is_string() ? k.get<std::string>() : "";
      if (kind != "c2p" && kind != "p2c") return r.Error("pos_att_type", "unknown entry");
      (kind == "c2p" ? c.c2p : c.p2c) = true;
    }
  }
  TS_ASSIGN_OR_RETURN(std::string norm, r.String("norm_rel_ebd", "layer_norm"));
  c.norm_rel = norm.find("layer_norm") != std::string::npos;
  TS_ASSIGN_OR_RETURN(c.buckets, r.Int("position_buckets", 256));
  TS_ASSIGN_OR_RETURN(int64_t max_pos, PositiveField(r, "max_position_embeddings", 512));
  TS_ASSIGN_OR_RETURN(c.max_rel, r.Int("max_relative_positions", -1));
  if (c.max_rel < 1) c.max_rel = max_pos;
  if (c.buckets > 0 && c.buckets < 2) return r.Error("position_buckets", "must be at least 2");
  TS_ASSIGN_OR_RETURN(c.feature_eps, r.Double("feature_layer_norm_eps", 1e-5));
  TS_ASSIGN_OR_RETURN(int64_t conv, r.Int("conv_kernel_size", 0));
  if (conv > 0) return r.Error("conv_kernel_size", "the ConvLayer is not supported by the zoo");
  return OkStatus();
}

// `xvector`: the class is a *ForXVector (its TDNN and x-vector sizes are read and checked);
// `adapter_ok`: it may run wav2vec2-bert's adapter.
StatusOr<Wav2Vec2Recipe> ParseWav2Vec2(const json& config, const Wav2Vec2Family& fam, bool xvector,
                                       bool adapter_ok) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  Wav2Vec2Recipe c;
  c.base = fam.base;
  c.extract_features_output = fam.extract_features_output;
  if (fam.hubert_projection) {
    TS_ASSIGN_OR_RETURN(c.feat_proj_layer_norm, r.Bool("feat_proj_layer_norm", true));
    TS_ASSIGN_OR_RETURN(bool bn, r.Bool("conv_pos_batch_norm", false));
    if (bn) return r.Error("conv_pos_batch_norm", "true is not supported by the zoo");
  }
  TS_ASSIGN_OR_RETURN(c.hidden, PositiveField(r, "hidden_size"));
  TS_ASSIGN_OR_RETURN(c.layers, PositiveField(r, "num_hidden_layers"));
  TS_ASSIGN_OR_RETURN(c.heads, PositiveField(r, "num_attention_heads"));
  if (c.hidden % c.heads != 0) {
    return r.Error("num_attention_heads", "must divide hidden size (" + std::to_string(c.hidden) +
                                              " % " + std::to_string(c.heads) + " != 0)");
  }
  TS_ASSIGN_OR_RETURN(c.intermediate, PositiveField(r, "intermediate_size"));
  TS_ASSIGN_OR_RETURN(c.vocab, PositiveField(r, "vocab_size", 32));
  if (fam.bert) {
    TS_RETURN_IF_ERROR(ParseBert(config, r, c, adapter_ok));
  } else {
    TS_RETURN_IF_ERROR(ParseFeatureEncoder(config, r, c, !fam.stacked_pos_conv));
  }
  if (fam.sew) TS_RETURN_IF_ERROR(ParseSew(r, c));
  if (fam.sew_d) TS_RETURN_IF_ERROR(ParseSewD(config, r, c));
  if (fam.conformer) TS_RETURN_IF_ERROR(ParseConformer(config, r, c, fam.bert));
  // Data2VecAudioConfig, SEWConfig (read by no module), Wav2Vec2ConformerConfig and
  // Wav2Vec2BertConfig: no do_stable_layer_norm.
  if (!fam.stacked_pos_conv && !fam.sew && !fam.conformer) {
    TS_ASSIGN_OR_RETURN(c.stable_layer_norm, r.Bool("do_stable_layer_norm", false));
  }
  if (!fam.bert) TS_RETURN_IF_ERROR(ParsePositionalConv(r, fam, c));
  const char* act = fam.bert ? "swish" : fam.sew_d ? "gelu_python" : "gelu";
  TS_ASSIGN_OR_RETURN(std::string ha, r.String("hidden_act", act));
  // gelu_python: transformers' GELUActivation in Python, the exact erf GELU.
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(ha == "gelu_python" ? "gelu" : ha, "hidden_act"));
  TS_ASSIGN_OR_RETURN(c.pad, r.Int("pad_token_id", 0));
  if (c.pad < 0 || c.pad >= c.vocab) {
    return r.Error("pad_token_id", "must be below vocab_size (CTC blank)");
  }
  TS_ASSIGN_OR_RETURN(c.proj_size, PositiveField(r, "classifier_proj_size", 256));
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_eps", fam.sew_d ? 1e-7 : 1e-5));
  TS_ASSIGN_OR_RETURN(std::string red, r.String("ctc_loss_reduction", fam.ctc_reduction));
  if (red != "sum" && red != "mean") return r.Error("ctc_loss_reduction", "unknown '" + red + "'");
  c.ctc_sum = red == "sum";
  TS_ASSIGN_OR_RETURN(c.zero_infinity, r.Bool("ctc_zero_infinity", false));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  TS_ASSIGN_OR_RETURN(c.weighted_layer_sum, r.Bool("use_weighted_layer_sum", false));
  if (fam.wavlm) {
    TS_ASSIGN_OR_RETURN(c.rel_buckets, PositiveField(r, "num_buckets", 320));
    TS_ASSIGN_OR_RETURN(c.rel_max_distance, PositiveField(r, "max_bucket_distance", 800));
    if (c.rel_buckets < 4) return r.Error("num_buckets", "must be at least 4");
    if (c.rel_max_distance <= c.rel_buckets / 4)
      return r.Error("max_bucket_distance", "must exceed num_buckets / 4");
  }
  if (!fam.bert) {
    TS_ASSIGN_OR_RETURN(bool adapter, r.Bool("add_adapter", false));
    if (adapter) return r.Error("add_adapter", "true is not supported by the zoo");
  }
  if (xvector) TS_RETURN_IF_ERROR(ParseXVector(config, r, c));
  return c;
}

// The tiny conv feature encoder and positional conv(s) of the lineage's waveform families.
void ScaleFeatureEncoder(const Wav2Vec2Recipe& c, const Wav2Vec2Family& fam, int64_t h, json& t) {
  std::vector<int64_t> dims;
  for (int64_t d : c.conv_dim) dims.push_back(ScaleRatio(d, c.conv_dim.back(), 32, 8));
  if (fam.sew && c.conv_dim.back() == c.hidden) {  // SEWModel without a feature_projection
    dims.clear();
    for (int64_t d : c.conv_dim) dims.push_back(ScaleRatio(d, c.conv_dim.back(), h, 8));
  }
  t["conv_dim"] = dims;
  if (fam.conformer) t["conv_depthwise_kernel_size"] = std::min<int64_t>(c.depthwise_kernel, 7);
  if (fam.sew) {  // a kernel of the same parity; at most 4 frames squeezed into one
    t["num_conv_pos_embeddings"] = std::min<int64_t>(c.pos_kernel, c.pos_kernel % 2 == 0 ? 8 : 7);
    t["squeeze_factor"] = std::min<int64_t>(c.squeeze, 4);
    // SEW-D: 4 buckets, so that the log buckets are reached over the 8 pooled frames.
    if (c.sew_d && c.buckets > 0) t["position_buckets"] = std::min<int64_t>(c.buckets, 4);
  } else if (c.pos_conv_layers > 0) {
    // data2vec-audio: two of the stacked convs, a kernel of parity kept
    t["num_conv_pos_embeddings"] = std::min<int64_t>(c.pos_conv_layers, 2);
    t["conv_pos_kernel_size"] = std::min<int64_t>(c.pos_kernel, c.pos_kernel % 2 == 0 ? 8 : 7);
  } else {
    t["num_conv_pos_embeddings"] = std::min<int64_t>(c.pos_kernel, 8);
  }
  t["num_conv_pos_embedding_groups"] = std::gcd(std::min<int64_t>(c.pos_groups, 16), h);
}

// wav2vec2-bert: a narrower fbank stack, the depthwise kernel as the conformer's, the distance
// clamps below the run's 16 frames so that the clamped rows stay exercised.
void ScaleBert(const Wav2Vec2Recipe& c, int64_t h, json& t) {
  if (c.adapter) {  // one adapter layer; the output width scaled with the hidden one
    const int64_t heads = t["num_attention_heads"].get<int64_t>();
    const int64_t o = ScaleRatio(c.out_hidden, c.hidden, h, heads) / heads * heads;
    t["output_hidden_size"] = c.out_hidden == c.hidden ? h : o;
    t["num_adapter_layers"] = 1;
  }
  t["feature_projection_input_dim"] = std::min<int64_t>(c.feature_input_dim, 32);
  t["conv_depthwise_kernel_size"] = std::min<int64_t>(c.depthwise_kernel, 7);
  if (c.conformer_pos == ConformerPos::kRelativeKey) {
    t["left_max_position_embeddings"] = std::min<int64_t>(c.left_max, 8);
    t["right_max_position_embeddings"] = std::min<int64_t>(c.right_max, 4);
  }
}

StatusOr<json> ScaleWav2Vec2(const json& config, const Wav2Vec2Family& fam, bool xvector,
                             bool adapter_ok) {
  TS_ASSIGN_OR_RETURN(Wav2Vec2Recipe c, ParseWav2Vec2(config, fam, xvector, adapter_ok));
  json t = config;
  const int64_t h = ScaleEncoderWidth(t, c.heads, c.hidden, c.intermediate, c.layers);
  if (fam.bert) {
    ScaleBert(c, h, t);
  } else {
    ScaleFeatureEncoder(c, fam, h, t);
  }
  if (xvector) {
    std::vector<int64_t> tdnn;
    for (int64_t d : c.tdnn_dim) tdnn.push_back(ScaleRatio(d, c.hidden, h, 8));
    t["tdnn_dim"] = tdnn;
    t["tdnn_kernel"] = c.tdnn_kernel;
    t["tdnn_dilation"] = c.tdnn_dilation;
    t["xvector_output_dim"] = ScaleRatio(c.xvector_dim, c.hidden, h, 8);
  }
  t["classifier_proj_size"] = std::min<int64_t>(c.proj_size, 32);
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t["vocab_size"] = vocab;
  for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id"}) MapTokenId(t, f, vocab);
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, kW2vFrames);
  return t;
}

// masked_spec_embed [hidden] under the base model's prefix: a parameter only the training-time
// masking reads, built when mask_time_prob or mask_feature_prob is positive (Wav2Vec2Config
// defaults 0.05 and 0), or always (`always`: UniSpeechSatModel, modular_unispeech_sat.py). The
// prefix and the width are those of the weight named `proj` ([hidden, ...] under the prefix).
void AddMaskedSpecEmbed(bool always, const std::string& proj, StateDictBuilder& sd) {
  const json& cfg = sd.model().spec().tiny_config;
  auto prob = [&](const char* field, double def) {
    if (!cfg.is_object() || !cfg.contains(field) || !cfg[field].is_number()) return def;
    return cfg[field].get<double>();
  };
  const bool built =
      always || prob("mask_time_prob", 0.05) > 0.0 || prob("mask_feature_prob", 0.0) > 0.0;
  std::vector<StateDictEntry> entries;
  for (const auto& [n, s] : sd.weights()) {
    if (!built || n.size() < proj.size() ||
        n.compare(n.size() - proj.size(), proj.size(), proj) != 0 || s.empty())
      continue;
    entries.push_back(
        {n.substr(0, n.size() - proj.size()) + "masked_spec_embed", {s[0]}, at::kFloat, ""});
  }
  for (StateDictEntry& e : entries) sd.Add(std::move(e));
}

}  // namespace

ArchEntry Wav2Vec2Entry(const Wav2Vec2Family& family, const std::string& arch, const char* task,
                        Wav2Vec2MakeFn make, json example) {
  example["architectures"] = {arch};
  example["model_type"] = family.model_type;
  const bool xvector = make == MakeWav2Vec2XVector;
  const bool adapter_ok = make == MakeWav2Vec2Base || make == MakeWav2Vec2Ctc;
  auto build = [make, family, xvector,
                adapter_ok](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(Wav2Vec2Recipe c,
                        ParseWav2Vec2(spec.tiny_config, family, xvector, adapter_ok));
    return make(std::move(spec), std::move(c));
  };
  auto scale = [family, xvector, adapter_ok](const json& config) {
    return ScaleWav2Vec2(config, family, xvector, adapter_ok);
  };
  const bool always = family.always_masked_spec_embed;
  // SEWModel may have no feature_projection: its encoder's layer_norm gives the prefix.
  const std::string proj = family.sew_d ? "encoder.encoder.layer.0.attention.output.dense.bias"
                           : family.sew ? "encoder.layer_norm.weight"
                                        : "feature_projection.projection.weight";
  return {
      {arch, family.model_type, task},
      std::move(example),
      scale,
      build,
      {.extra = [always, proj](StateDictBuilder& sd) { AddMaskedSpecEmbed(always, proj, sd); }}};
}

const Wav2Vec2Family& Wav2Vec2Lineage() {
  static const Wav2Vec2Family kFamily;
  return kFamily;
}

json XVectorExample(json example) {
  example["tdnn_dim"] = {512, 512, 512, 512, 1500};
  example["tdnn_kernel"] = {5, 3, 3, 1, 1};
  example["tdnn_dilation"] = {1, 2, 3, 1, 1};
  example["xvector_output_dim"] = 512;
  example["num_labels"] = 1251;
  return example;
}

// Modelled on facebook/wav2vec2-base-960h.
json Wav2Vec2Example() {
  return {{"model_type", "wav2vec2"},
          {"hidden_size", 768},
          {"num_hidden_layers", 12},
          {"num_attention_heads", 12},
          {"intermediate_size", 3072},
          {"hidden_act", "gelu"},
          {"conv_dim", {512, 512, 512, 512, 512, 512, 512}},
          {"conv_stride", {5, 2, 2, 2, 2, 2, 2}},
          {"conv_kernel", {10, 3, 3, 3, 3, 2, 2}},
          {"conv_bias", false},
          {"feat_extract_norm", "group"},
          {"feat_extract_activation", "gelu"},
          {"num_conv_pos_embeddings", 128},
          {"num_conv_pos_embedding_groups", 16},
          {"do_stable_layer_norm", false},
          {"layer_norm_eps", 1e-5},
          {"vocab_size", 32},
          {"pad_token_id", 0},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"ctc_loss_reduction", "sum"},
          {"ctc_zero_infinity", false},
          {"classifier_proj_size", 256},
          {"initializer_range", 0.02}};
}

namespace {

std::vector<ArchEntry> Wav2Vec2Archs() {
  // A base-960h fine-tune as transformers' CTC recipe writes it (patrickvonplaten/
  // wav2vec2-base-timit-demo: ctc_loss_reduction "mean", the tokenizer's [PAD] = 31 as blank).
  json ctc = Wav2Vec2Example();
  ctc["ctc_loss_reduction"] = "mean";
  ctc["pad_token_id"] = 31;
  std::vector<ArchEntry> v;
  const Wav2Vec2Family& f = Wav2Vec2Lineage();
  v.push_back(
      Wav2Vec2Entry(f, "Wav2Vec2Model", "feature-extraction", MakeWav2Vec2Base, Wav2Vec2Example()));
  v.push_back(Wav2Vec2Entry(f, "Wav2Vec2ForCTC", "automatic-speech-recognition", MakeWav2Vec2Ctc,
                            std::move(ctc)));
  v.push_back(Wav2Vec2Entry(f, "Wav2Vec2ForSequenceClassification", "audio-classification",
                            MakeWav2Vec2SequenceClassification, Wav2Vec2Example()));
  v.push_back(Wav2Vec2Entry(f, "Wav2Vec2ForAudioFrameClassification", "audio-frame-classification",
                            MakeWav2Vec2FrameClassification, Wav2Vec2Example()));
  // anton-l/wav2vec2-base-superb-sv
  v.push_back(Wav2Vec2Entry(f, "Wav2Vec2ForXVector", "audio-xvector", MakeWav2Vec2XVector,
                            XVectorExample(Wav2Vec2Example())));
  return v;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Wav2Vec2, Wav2Vec2Archs);

}  // namespace ts::zoo::internal
