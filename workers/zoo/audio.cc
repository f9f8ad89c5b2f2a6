// Zoo: audio families (README.md): Whisper (encoder-decoder over log-mel features) and wav2vec2
// (conv feature extractor + transformer encoder; CTC and sequence-classification heads).
// Conv1d is windows + matmul (see Conv1d below) and follows the nn.h emulation contract.
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

using P = TinyProfile;
using json = nlohmann::json;
using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// ---- convolution front ends.

// conv1d as windows + matmul: x [B, C, T] -> [B, O, T'], identical to at::conv1d (zero padding,
// groups). Not at::conv1d: libtorch 1.13's mkldnn conv1d backward returns garbage weight
// gradients (uninitialised memory, different on every run) when the gradient reaching it comes
// back through the encoder's [B, T, C] layout, which made every audio model's training diverge.
// nn::Linear / nn::Matmul carry the bf16 emulation.
at::Tensor Conv1d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t stride,
                  int64_t padding, int64_t groups = 1) {
  const int64_t bsz = x.size(0), c = x.size(1), o = w.size(0), k = w.size(2);
  at::Tensor xp = padding > 0 ? at::constant_pad_nd(x, {padding, padding}) : x;
  at::Tensor win = xp.unfold(2, k, stride);  // [B, C, T', k]
  const int64_t t = win.size(2);
  at::Tensor cols = win.permute({0, 2, 1, 3}).reshape({bsz, t, c * k});  // columns c * k + j
  at::Tensor wm = w.reshape({o, (c / groups) * k});
  if (groups > 1) {
    // Grouped: the block-diagonal [O, C * k] matrix of the groups' [O / G, C / G * k] blocks, so
    // that one Linear (one matmul class for the device) computes every group.
    wm = at::block_diag(wm.chunk(groups, 0));
  }
  return nn::Linear(cols, wm, b).transpose(1, 2);
}

StatusOr<int64_t> PositiveInt(const ConfigReader& r, const std::string& field,
                              std::optional<int64_t> def = std::nullopt) {
  StatusOr<int64_t> v = def ? r.Int(field, *def) : r.Int(field);
  if (!v.ok()) return v.status();
  if (*v <= 0) return r.Error(field, "must be positive, got " + std::to_string(*v));
  return *v;
}

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

Status HeadsDivide(const ConfigReader& r, const std::string& heads_field, int64_t hidden,
                   int64_t heads) {
  if (hidden % heads != 0) {
    return r.Error(heads_field, "must divide hidden size (" + std::to_string(hidden) + " % " +
                                    std::to_string(heads) + " != 0)");
  }
  return OkStatus();
}

// Multi-head attention with HF's q/k/v/out projection names under `p`.
at::Tensor Mha(const WeightMap& w, const std::string& p, const at::Tensor& x, const at::Tensor& kv,
               int64_t heads, const at::Tensor& blocked, bool k_bias) {
  const int64_t b = x.size(0), s = x.size(1), t = kv.size(1), h = x.size(2), hd = h / heads;
  auto lin = [&](const at::Tensor& y, const std::string& n, bool bias = true) {
    return nn::Linear(y, GetWeight(w, p + n + ".weight"),
                      bias ? GetWeight(w, p + n + ".bias") : at::Tensor());
  };
  at::Tensor q = lin(x, "q_proj").view({b, s, heads, hd}).transpose(1, 2);
  at::Tensor k = lin(kv, "k_proj", k_bias).view({b, t, heads, hd}).transpose(1, 2);
  at::Tensor v = lin(kv, "v_proj").view({b, t, heads, hd}).transpose(1, 2);
  at::Tensor ctx = nn::Attention(q, k, v, blocked, 1.0 / std::sqrt(static_cast<double>(hd)));
  return lin(ctx.transpose(1, 2).reshape({b, s, h}), "out_proj");
}

at::Tensor Ln(const WeightMap& w, const std::string& p, const at::Tensor& x, double eps) {
  return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), eps);
}

at::Tensor Lin(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return nn::Linear(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"));
}

class ShapedModel : public Model {
 public:
  using Model::Model;
  Shapes WeightShapes() const override { return shapes_; }

 protected:
  std::string Add(const std::string& name, std::vector<int64_t> shape) {
    shapes_.emplace_back(name, std::move(shape));
    return name;
  }
  void AddLinear(const std::string& p, int64_t out, int64_t in, bool bias = true) {
    Add(p + ".weight", {out, in});
    if (bias) Add(p + ".bias", {out});
  }
  // Conv1d weights [out, in / groups, k]: fan_in = in / groups * k (the base policy counts only
  // k for 3-d tensors). The wav2vec2 feature extractor has no norm between its convs after the
  // first: He init (HF: kaiming_normal_) keeps its activations O(1) through the gelu stack.
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (t.dim() == 3 && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) {
      const double fan_in = static_cast<double>(t.size(1) * t.size(2));
      const double gain = name.find("feature_extractor.") != std::string::npos ? 2.0 : 1.0;
      t.normal_(0.0, std::sqrt(gain / fan_in), gen);
      return;
    }
    Model::InitWeight(name, t, gen);
  }
  void AddLn(const std::string& p, int64_t n) {
    Add(p + ".weight", {n});
    Add(p + ".bias", {n});
  }
  Shapes shapes_;
};

// ================================================================ Whisper

struct WhisperConfig {
  int64_t vocab = 0, d_model = 0, enc_layers = 0, dec_layers = 0, enc_heads = 0, dec_heads = 0;
  int64_t enc_ffn = 0, dec_ffn = 0, mel = 80, max_source = 1500, max_target = 448;
  int64_t decoder_start = 50257;
  Activation act = Activation::kGeluErf;
  bool scale_embedding = false;
  int64_t proj_size = 256, num_labels = 2;  // WhisperForAudioClassification
};

StatusOr<WhisperConfig> ParseWhisper(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  WhisperConfig c;
  TS_ASSIGN_OR_RETURN(c.vocab, PositiveInt(r, "vocab_size"));
  TS_ASSIGN_OR_RETURN(c.d_model, PositiveInt(r, "d_model"));
  TS_ASSIGN_OR_RETURN(c.enc_layers, PositiveInt(r, "encoder_layers"));
  TS_ASSIGN_OR_RETURN(c.dec_layers, PositiveInt(r, "decoder_layers"));
  TS_ASSIGN_OR_RETURN(c.enc_heads, PositiveInt(r, "encoder_attention_heads"));
  TS_ASSIGN_OR_RETURN(c.dec_heads, PositiveInt(r, "decoder_attention_heads"));
  TS_RETURN_IF_ERROR(HeadsDivide(r, "encoder_attention_heads", c.d_model, c.enc_heads));
  TS_RETURN_IF_ERROR(HeadsDivide(r, "decoder_attention_heads", c.d_model, c.dec_heads));
  TS_ASSIGN_OR_RETURN(c.enc_ffn, PositiveInt(r, "encoder_ffn_dim"));
  TS_ASSIGN_OR_RETURN(c.dec_ffn, PositiveInt(r, "decoder_ffn_dim"));
  TS_ASSIGN_OR_RETURN(c.mel, PositiveInt(r, "num_mel_bins", 80));
  TS_ASSIGN_OR_RETURN(c.max_source, PositiveInt(r, "max_source_positions", 1500));
  TS_ASSIGN_OR_RETURN(c.max_target, PositiveInt(r, "max_target_positions", 448));
  TS_ASSIGN_OR_RETURN(c.decoder_start, r.Int("decoder_start_token_id", 50257));
  if (c.decoder_start < 0 || c.decoder_start >= c.vocab) {
    return r.Error("decoder_start_token_id", "must be a token id below vocab_size");
  }
  TS_ASSIGN_OR_RETURN(std::string act, r.String("activation_function", "gelu"));
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(act, "activation_function"));
  TS_ASSIGN_OR_RETURN(c.scale_embedding, r.Bool("scale_embedding", false));
  TS_ASSIGN_OR_RETURN(bool tie, r.Bool("tie_word_embeddings", true));
  if (!tie) return r.Error("tie_word_embeddings", "only tied proj_out is supported");
  TS_ASSIGN_OR_RETURN(c.proj_size, PositiveInt(r, "classifier_proj_size", 256));
  TS_ASSIGN_OR_RETURN(bool weighted, r.Bool("use_weighted_layer_sum", false));
  if (weighted) return r.Error("use_weighted_layer_sum", "true is not supported by the zoo");
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

constexpr int64_t kWhisperDecLen = 16;

StatusOr<json> ScaleWhisper(const json& config) {
  TS_ASSIGN_OR_RETURN(WhisperConfig c, ParseWhisper(config));
  json t = config;
  const int64_t heads = std::min(c.enc_heads, P::kHeads);
  const int64_t d = heads * (P::kHidden / P::kHeads);
  t["d_model"] = d;
  t["encoder_attention_heads"] = heads;
  t["decoder_attention_heads"] = std::min(c.dec_heads, P::kHeads);
  if (d % t["decoder_attention_heads"].get<int64_t>() != 0) t["decoder_attention_heads"] = heads;
  t["encoder_ffn_dim"] = ScaleRatio(c.enc_ffn, c.d_model, d, 8);
  t["decoder_ffn_dim"] = ScaleRatio(c.dec_ffn, c.d_model, d, 8);
  t["encoder_layers"] = TinyDepth(c.enc_layers, false);
  t["decoder_layers"] = TinyDepth(c.dec_layers, false);
  t["num_hidden_layers"] = TinyDepth(c.enc_layers, false);
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t["vocab_size"] = vocab;
  for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"})
    MapTokenId(t, f, vocab);
  t.erase("suppress_tokens");
  t.erase("begin_suppress_tokens");
  t.erase("forced_decoder_ids");
  t["max_source_positions"] = std::min<int64_t>(c.max_source, 16);
  t["max_target_positions"] = std::min<int64_t>(c.max_target, 2 * kWhisperDecLen);
  t["classifier_proj_size"] = std::min<int64_t>(c.proj_size, 32);
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, kWhisperDecLen);
  return t;
}

// WhisperForConditionalGeneration ("model." + proj_out tied to embed_tokens), WhisperModel (no
// prefix, decoder last_hidden_state), WhisperForAudioClassification (the encoder alone, then
// projector, mean over frames, classifier).
enum class WhisperHead { kConditionalGeneration, kModel, kAudioClassification };

class WhisperModel : public ShapedModel {
 public:
  WhisperModel(ModelSpec spec, WhisperConfig c, WhisperHead head)
      : ShapedModel(std::move(spec)), c_(std::move(c)), head_(head) {
    const int64_t d = c_.d_model;
    pre_ = head_ == WhisperHead::kConditionalGeneration ? "model." : "";
    Add(pre_ + "encoder.conv1.weight", {d, c_.mel, 3});
    Add(pre_ + "encoder.conv1.bias", {d});
    Add(pre_ + "encoder.conv2.weight", {d, d, 3});
    Add(pre_ + "encoder.conv2.bias", {d});
    Add(pre_ + "encoder.embed_positions.weight", {c_.max_source, d});
    for (int64_t i = 0; i < c_.enc_layers; ++i) AddLayer(pre_ + "encoder.layers." + std::to_string(i) + ".", c_.enc_ffn, false);
    AddLn(pre_ + "encoder.layer_norm", d);
    if (head_ == WhisperHead::kAudioClassification) {
      AddLinear("projector", c_.proj_size, d);
      AddLinear("classifier", c_.num_labels, c_.proj_size);
      return;
    }
    Add(pre_ + "decoder.embed_tokens.weight", {c_.vocab, d});
    Add(pre_ + "decoder.embed_positions.weight", {c_.max_target, d});
    for (int64_t i = 0; i < c_.dec_layers; ++i) AddLayer(pre_ + "decoder.layers." + std::to_string(i) + ".", c_.dec_ffn, true);
    AddLn(pre_ + "decoder.layer_norm", d);
  }

  std::vector<std::string> OutputNames() const override {
    if (head_ == WhisperHead::kAudioClassification) return {"logits"};
    if (head_ == WhisperHead::kModel) return {"last_hidden_state", "encoder_last_hidden_state"};
    return {"logits", "encoder_last_hidden_state"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& feats = GetInput(inputs, "input_features");
    at::Tensor x = nn::Activate(Conv1d(feats, GetWeight(w, pre_ + "encoder.conv1.weight"),
                                       GetWeight(w, pre_ + "encoder.conv1.bias"), 1, 1), c_.act);
    x = nn::Activate(Conv1d(x, GetWeight(w, pre_ + "encoder.conv2.weight"),
                            GetWeight(w, pre_ + "encoder.conv2.bias"), 2, 1), c_.act);
    x = x.permute({0, 2, 1});
    x = x + GetWeight(w, pre_ + "encoder.embed_positions.weight").narrow(0, 0, x.size(1));
    for (int64_t i = 0; i < c_.enc_layers; ++i) {
      const std::string lp = pre_ + "encoder.layers." + std::to_string(i) + ".";
      at::Tensor y = Ln(w, lp + "self_attn_layer_norm", x, 1e-5);
      x = x + Mha(w, lp + "self_attn.", y, y, c_.enc_heads, at::Tensor(), false);
      x = x + Ffn(w, lp, Ln(w, lp + "final_layer_norm", x, 1e-5));
    }
    at::Tensor enc = Ln(w, pre_ + "encoder.layer_norm", x, 1e-5);
    if (head_ == WhisperHead::kAudioClassification) {
      return {Lin(w, "classifier", Lin(w, "projector", enc).mean(1))};
    }

    const at::Tensor& ids = GetInput(inputs, "decoder_input_ids");
    const int64_t s = ids.size(1);
    const at::Tensor& emb = GetWeight(w, pre_ + "decoder.embed_tokens.weight");
    at::Tensor h = nn::Embedding(emb, ids);
    if (c_.scale_embedding) h = h * std::sqrt(static_cast<double>(c_.d_model));
    h = h + GetWeight(w, pre_ + "decoder.embed_positions.weight").narrow(0, 0, s);
    at::Tensor causal = nn::BlockedKeys(GetOptionalInput(inputs, "decoder_attention_mask"), s,
                                        /*causal=*/true, std::nullopt, ids.device());
    for (int64_t i = 0; i < c_.dec_layers; ++i) {
      const std::string lp = pre_ + "decoder.layers." + std::to_string(i) + ".";
      at::Tensor y = Ln(w, lp + "self_attn_layer_norm", h, 1e-5);
      h = h + Mha(w, lp + "self_attn.", y, y, c_.dec_heads, causal, false);
      y = Ln(w, lp + "encoder_attn_layer_norm", h, 1e-5);
      h = h + Mha(w, lp + "encoder_attn.", y, enc, c_.dec_heads, at::Tensor(), false);
      h = h + Ffn(w, lp, Ln(w, lp + "final_layer_norm", h, 1e-5));
    }
    h = Ln(w, pre_ + "decoder.layer_norm", h, 1e-5);
    if (head_ == WhisperHead::kModel) return {h, enc};
    return {nn::Linear(h, emb), enc};  // proj_out tied to embed_tokens
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    at::Tensor logits = Forward(w, batch.inputs)[0];
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    if (head_ == WhisperHead::kModel) {
      // No HF loss: regress the decoder states onto a fixed random target.
      return at::mse_loss(logits, GetInput(batch.labels, "target").to(logits.scalar_type()));
    }
    if (head_ == WhisperHead::kAudioClassification && c_.num_labels == 1) {
      return at::mse_loss(logits.squeeze(-1), labels.to(logits.scalar_type()));
    }
    return CrossEntropy(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}));
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    const int64_t s = std::min(kWhisperDecLen, c_.max_target);
    Batch batch;
    const auto fopts = at::TensorOptions().dtype(at::kFloat);
    batch.inputs["input_features"] = at::randn({batch_size, c_.mel, 2 * c_.max_source}, gen, fopts);
    if (head_ == WhisperHead::kAudioClassification) {
      batch.labels["labels"] = c_.num_labels == 1 ? at::randn({batch_size}, gen, fopts)
                                                  : at::randint(0, c_.num_labels, {batch_size}, gen, lopts);
      return batch;
    }
    at::Tensor labels = at::randint(0, c_.vocab, {batch_size, s}, gen, lopts);
    // decoder_input_ids = labels shifted right behind decoder_start_token_id (HF).
    at::Tensor dec = at::cat({at::full({batch_size, 1}, c_.decoder_start, lopts),
                              labels.narrow(1, 0, s - 1)}, 1);
    batch.inputs["decoder_input_ids"] = dec;
    batch.labels["labels"] = labels;
    if (head_ == WhisperHead::kModel) batch.labels["target"] = at::randn({batch_size, s, c_.d_model}, gen, fopts);
    return batch;
  }

 private:
  void AddLayer(const std::string& lp, int64_t ffn, bool cross) {
    const int64_t d = c_.d_model;
    for (const char* a : cross ? std::vector<const char*>{"self_attn.", "encoder_attn."}
                               : std::vector<const char*>{"self_attn."}) {
      AddLinear(lp + a + "k_proj", d, d, false);
      AddLinear(lp + a + "v_proj", d, d);
      AddLinear(lp + a + "q_proj", d, d);
      AddLinear(lp + a + "out_proj", d, d);
      AddLn(lp + (std::string(a) == "self_attn." ? "self_attn_layer_norm" : "encoder_attn_layer_norm"), d);
    }
    AddLinear(lp + "fc1", ffn, d);
    AddLinear(lp + "fc2", d, ffn);
    AddLn(lp + "final_layer_norm", d);
  }
  at::Tensor Ffn(const WeightMap& w, const std::string& lp, const at::Tensor& x) const {
    return Lin(w, lp + "fc2", nn::Activate(Lin(w, lp + "fc1", x), c_.act));
  }

  WhisperConfig c_;
  WhisperHead head_;
  std::string pre_;
};

// ================================================================ wav2vec2

enum class W2vHead { kBase, kCtc, kSequenceClassification };

struct Wav2Vec2Config {
  int64_t hidden = 0, layers = 0, heads = 0, intermediate = 0, vocab = 32;
  std::vector<int64_t> conv_dim, conv_stride, conv_kernel;
  bool group_norm = true, conv_bias = false, stable_layer_norm = false;
  Activation feat_act = Activation::kGeluErf, act = Activation::kGeluErf;
  int64_t pos_kernel = 128, pos_groups = 16, pad = 0, proj_size = 256, num_labels = 2;
  double eps = 1e-5;
  bool ctc_sum = true, zero_infinity = false;
};

StatusOr<Wav2Vec2Config> ParseWav2Vec2(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  Wav2Vec2Config c;
  TS_ASSIGN_OR_RETURN(c.hidden, PositiveInt(r, "hidden_size"));
  TS_ASSIGN_OR_RETURN(c.layers, PositiveInt(r, "num_hidden_layers"));
  TS_ASSIGN_OR_RETURN(c.heads, PositiveInt(r, "num_attention_heads"));
  TS_RETURN_IF_ERROR(HeadsDivide(r, "num_attention_heads", c.hidden, c.heads));
  TS_ASSIGN_OR_RETURN(c.intermediate, PositiveInt(r, "intermediate_size"));
  TS_ASSIGN_OR_RETURN(c.vocab, PositiveInt(r, "vocab_size", 32));
  TS_ASSIGN_OR_RETURN(c.conv_dim, IntList(config, "conv_dim", std::vector<int64_t>(7, 512)));
  TS_ASSIGN_OR_RETURN(c.conv_stride, IntList(config, "conv_stride", {5, 2, 2, 2, 2, 2, 2}));
  TS_ASSIGN_OR_RETURN(c.conv_kernel, IntList(config, "conv_kernel", {10, 3, 3, 3, 3, 2, 2}));
  if (c.conv_dim.empty()) return InvalidArgumentError("conv_dim: must not be empty");
  if (c.conv_stride.size() != c.conv_dim.size()) return InvalidArgumentError("conv_stride: must have as many entries as conv_dim");
  if (c.conv_kernel.size() != c.conv_dim.size()) return InvalidArgumentError("conv_kernel: must have as many entries as conv_dim");
  TS_ASSIGN_OR_RETURN(std::string norm, r.String("feat_extract_norm", "group"));
  if (norm != "group" && norm != "layer") return r.Error("feat_extract_norm", "unknown '" + norm + "'");
  c.group_norm = norm == "group";
  TS_ASSIGN_OR_RETURN(c.conv_bias, r.Bool("conv_bias", false));
  TS_ASSIGN_OR_RETURN(c.stable_layer_norm, r.Bool("do_stable_layer_norm", false));
  TS_ASSIGN_OR_RETURN(std::string fa, r.String("feat_extract_activation", "gelu"));
  TS_ASSIGN_OR_RETURN(c.feat_act, ParseActivation(fa, "feat_extract_activation"));
  TS_ASSIGN_OR_RETURN(std::string ha, r.String("hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(ha, "hidden_act"));
  TS_ASSIGN_OR_RETURN(c.pos_kernel, PositiveInt(r, "num_conv_pos_embeddings", 128));
  TS_ASSIGN_OR_RETURN(c.pos_groups, PositiveInt(r, "num_conv_pos_embedding_groups", 16));
  if (c.hidden % c.pos_groups != 0) {
    return r.Error("num_conv_pos_embedding_groups", "must divide hidden_size");
  }
  TS_ASSIGN_OR_RETURN(c.pad, r.Int("pad_token_id", 0));
  if (c.pad < 0 || c.pad >= c.vocab) return r.Error("pad_token_id", "must be below vocab_size (CTC blank)");
  TS_ASSIGN_OR_RETURN(c.proj_size, PositiveInt(r, "classifier_proj_size", 256));
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_eps", 1e-5));
  TS_ASSIGN_OR_RETURN(std::string red, r.String("ctc_loss_reduction", "sum"));
  if (red != "sum" && red != "mean") return r.Error("ctc_loss_reduction", "unknown '" + red + "'");
  c.ctc_sum = red == "sum";
  TS_ASSIGN_OR_RETURN(c.zero_infinity, r.Bool("ctc_zero_infinity", false));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

constexpr int64_t kW2vFrames = 16;

StatusOr<json> ScaleWav2Vec2(const json& config) {
  TS_ASSIGN_OR_RETURN(Wav2Vec2Config c, ParseWav2Vec2(config));
  json t = config;
  const int64_t heads = std::min(c.heads, P::kHeads);
  const int64_t h = heads * (P::kHidden / P::kHeads);
  t["hidden_size"] = h;
  t["num_attention_heads"] = heads;
  t["intermediate_size"] = ScaleRatio(c.intermediate, c.hidden, h, 8);
  t["num_hidden_layers"] = TinyDepth(c.layers, false);
  std::vector<int64_t> dims;
  for (int64_t d : c.conv_dim) dims.push_back(ScaleRatio(d, c.conv_dim.back(), 32, 8));
  t["conv_dim"] = dims;
  t["num_conv_pos_embeddings"] = std::min<int64_t>(c.pos_kernel, 8);
  t["num_conv_pos_embedding_groups"] = std::gcd(std::min<int64_t>(c.pos_groups, 16), h);
  t["classifier_proj_size"] = std::min<int64_t>(c.proj_size, 32);
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t["vocab_size"] = vocab;
  for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id"}) MapTokenId(t, f, vocab);
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, kW2vFrames);
  return t;
}

class Wav2Vec2Model : public ShapedModel {
 public:
  Wav2Vec2Model(ModelSpec spec, Wav2Vec2Config c, W2vHead head)
      : ShapedModel(std::move(spec)), c_(std::move(c)), head_(head) {
    pre_ = head == W2vHead::kBase ? "" : "wav2vec2.";
    int64_t in = 1;
    for (size_t i = 0; i < c_.conv_dim.size(); ++i) {
      const std::string lp = pre_ + "feature_extractor.conv_layers." + std::to_string(i) + ".";
      Add(lp + "conv.weight", {c_.conv_dim[i], in, c_.conv_kernel[i]});
      if (c_.conv_bias) Add(lp + "conv.bias", {c_.conv_dim[i]});
      if (!c_.group_norm || i == 0) AddLn(lp + "layer_norm", c_.conv_dim[i]);
      in = c_.conv_dim[i];
    }
    const int64_t h = c_.hidden;
    AddLn(pre_ + "feature_projection.layer_norm", in);
    AddLinear(pre_ + "feature_projection.projection", h, in);
    const std::string pc = pre_ + "encoder.pos_conv_embed.conv.";
    Add(pc + "bias", {h});
    Add(pc + "parametrizations.weight.original0", {1, 1, c_.pos_kernel});
    Add(pc + "parametrizations.weight.original1", {h, h / c_.pos_groups, c_.pos_kernel});
    AddLn(pre_ + "encoder.layer_norm", h);
    for (int64_t i = 0; i < c_.layers; ++i) {
      const std::string lp = pre_ + "encoder.layers." + std::to_string(i) + ".";
      for (const char* n : {"k_proj", "v_proj", "q_proj", "out_proj"}) AddLinear(lp + "attention." + n, h, h);
      AddLn(lp + "layer_norm", h);
      AddLinear(lp + "feed_forward.intermediate_dense", c_.intermediate, h);
      AddLinear(lp + "feed_forward.output_dense", h, c_.intermediate);
      AddLn(lp + "final_layer_norm", h);
    }
    if (head == W2vHead::kCtc) AddLinear("lm_head", c_.vocab, h);
    if (head == W2vHead::kSequenceClassification) {
      AddLinear("projector", c_.proj_size, h);
      AddLinear("classifier", c_.num_labels, c_.proj_size);
    }
  }

  std::vector<std::string> OutputNames() const override {
    if (head_ == W2vHead::kBase) return {"last_hidden_state", "extract_features"};
    return {"logits"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor x = GetInput(inputs, "input_values").unsqueeze(1);
    for (size_t i = 0; i < c_.conv_dim.size(); ++i) {
      const std::string lp = pre_ + "feature_extractor.conv_layers." + std::to_string(i) + ".";
      x = Conv1d(x, GetWeight(w, lp + "conv.weight"),
                 c_.conv_bias ? GetWeight(w, lp + "conv.bias") : at::Tensor(), c_.conv_stride[i], 0);
      if (c_.group_norm && i == 0) {
        x = at::group_norm(x, x.size(1), GetWeight(w, lp + "layer_norm.weight"),
                           GetWeight(w, lp + "layer_norm.bias"), 1e-5);
      } else if (!c_.group_norm) {
        x = Ln(w, lp + "layer_norm", x.transpose(1, 2), 1e-5).transpose(1, 2);
      }
      x = nn::Activate(x, c_.feat_act);
    }
    at::Tensor feats = Ln(w, pre_ + "feature_projection.layer_norm", x.transpose(1, 2), c_.eps);
    at::Tensor hs = Lin(w, pre_ + "feature_projection.projection", feats);
    // Positional conv embedding (weight norm over dim 2, same padding, grouped).
    const std::string pc = pre_ + "encoder.pos_conv_embed.conv.";
    const at::Tensor& g = GetWeight(w, pc + "parametrizations.weight.original0");
    const at::Tensor& v = GetWeight(w, pc + "parametrizations.weight.original1");
    at::Tensor weight = g * v / v.pow(2).sum(at::IntArrayRef{0, 1}, /*keepdim=*/true).sqrt();
    at::Tensor pos = Conv1d(hs.transpose(1, 2), weight, GetWeight(w, pc + "bias"), 1,
                            c_.pos_kernel / 2, c_.pos_groups);
    if (c_.pos_kernel % 2 == 0) pos = pos.narrow(2, 0, pos.size(2) - 1);
    hs = hs + nn::Activate(pos, c_.feat_act).transpose(1, 2);
    if (!c_.stable_layer_norm) hs = Ln(w, pre_ + "encoder.layer_norm", hs, c_.eps);
    for (int64_t i = 0; i < c_.layers; ++i) {
      const std::string lp = pre_ + "encoder.layers." + std::to_string(i) + ".";
      auto ffn = [&](const at::Tensor& y) {
        return Lin(w, lp + "feed_forward.output_dense",
                   nn::Activate(Lin(w, lp + "feed_forward.intermediate_dense", y), c_.act));
      };
      if (c_.stable_layer_norm) {
        at::Tensor y = Ln(w, lp + "layer_norm", hs, c_.eps);
        hs = hs + Mha(w, lp + "attention.", y, y, c_.heads, at::Tensor(), true);
        hs = hs + ffn(Ln(w, lp + "final_layer_norm", hs, c_.eps));
      } else {
        hs = Ln(w, lp + "layer_norm", hs + Mha(w, lp + "attention.", hs, hs, c_.heads, at::Tensor(), true), c_.eps);
        hs = Ln(w, lp + "final_layer_norm", hs + ffn(hs), c_.eps);
      }
    }
    if (c_.stable_layer_norm) hs = Ln(w, pre_ + "encoder.layer_norm", hs, c_.eps);
    if (head_ == W2vHead::kBase) return {hs, feats};
    if (head_ == W2vHead::kCtc) return {Lin(w, "lm_head", hs)};
    at::Tensor pooled = Lin(w, "projector", hs).mean(1);
    return {Lin(w, "classifier", pooled)};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    if (head_ == W2vHead::kBase) {
      return (out[0] - GetInput(batch.labels, "target").to(out[0].scalar_type())).pow(2).mean() +
             out[1].pow(2).mean();
    }
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    if (head_ == W2vHead::kSequenceClassification) {
      if (c_.num_labels == 1) return at::mse_loss(out[0].squeeze(-1), labels.to(out[0].scalar_type()));
      return CrossEntropy(out[0], labels);
    }
    // HF: log_softmax over the vocab, [T, B, V]; blank = pad_token_id; padded labels are < 0.
    at::Tensor log_probs = at::log_softmax(out[0], -1).transpose(0, 1);
    const int64_t b = out[0].size(0), t = out[0].size(1);
    at::Tensor input_lengths = at::full({b}, t, labels.options());
    at::Tensor target_lengths = (labels >= 0).sum(-1);
    return at::ctc_loss(log_probs, labels.clamp_min(0), input_lengths, target_lengths, c_.pad,
                        c_.ctc_sum ? at::Reduction::Sum : at::Reduction::Mean, c_.zero_infinity);
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto fopts = at::TensorOptions().dtype(at::kFloat);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    int64_t len = kW2vFrames;
    for (size_t i = c_.conv_dim.size(); i-- > 0;) len = (len - 1) * c_.conv_stride[i] + c_.conv_kernel[i];
    Batch batch;
    batch.inputs["input_values"] = at::randn({batch_size, len}, gen, fopts);
    if (head_ == W2vHead::kBase) {
      batch.labels["target"] = at::randn({batch_size, kW2vFrames, c_.hidden}, gen, fopts);
    } else if (head_ == W2vHead::kCtc) {
      // Non-blank character ids; row 1 has its last quarter padded with -100 (HF).
      const int64_t l = kW2vFrames / 4;
      at::Tensor labels = at::randint(0, c_.vocab - 1, {batch_size, l}, gen, lopts);
      labels = labels + (labels >= c_.pad).to(at::kLong);
      if (batch_size > 1) labels[1][l - 1] = -100;
      batch.labels["labels"] = labels;
    } else {
      batch.labels["labels"] = c_.num_labels == 1 ? at::randn({batch_size}, gen, fopts)
                                                  : at::randint(0, c_.num_labels, {batch_size}, gen, lopts);
    }
    return batch;
  }

 protected:
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (name.find("parametrizations.weight.original0") != std::string::npos) {
      t.uniform_(0.5, 1.5, gen);
      return;
    }
    ShapedModel::InitWeight(name, t, gen);
  }

 private:
  Wav2Vec2Config c_;
  W2vHead head_;
  std::string pre_;
};

}  // namespace

// Every audio class built and unit-tested (audio_test.cc); AudioArchs() registers those whose
// 5-step training on the defect-free sim-2.0 baseline matches its declared numerics.
std::vector<ArchEntry> AudioArchsPending();

// Not registered: Wav2Vec2Model and Wav2Vec2ForCTC. Their device loss curves leave the declared
// bf16 curve by ~2x the reference noise at step 2 (a consistent gap, not divergence); the cause
// is not identified yet.
std::vector<ArchEntry> AudioArchs() {
  std::vector<ArchEntry> out;
  for (auto& e : AudioArchsPending()) {
    if (e.info.arch == "Wav2Vec2Model" || e.info.arch == "Wav2Vec2ForCTC") continue;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<ArchEntry> AudioArchsPending() {
  // Modelled on openai/whisper-tiny.
  const json whisper = {{"architectures", {"WhisperForConditionalGeneration"}},
                        {"model_type", "whisper"}, {"vocab_size", 51865}, {"d_model", 384},
                        {"encoder_layers", 4}, {"decoder_layers", 4},
                        {"encoder_attention_heads", 6}, {"decoder_attention_heads", 6},
                        {"encoder_ffn_dim", 1536}, {"decoder_ffn_dim", 1536},
                        {"num_mel_bins", 80}, {"max_source_positions", 1500},
                        {"max_target_positions", 448}, {"activation_function", "gelu"},
                        {"scale_embedding", false}, {"pad_token_id", 50257},
                        {"bos_token_id", 50257}, {"eos_token_id", 50257},
                        {"decoder_start_token_id", 50258}, {"tie_word_embeddings", true},
                        {"num_hidden_layers", 4}, {"init_std", 0.02}};
  // Modelled on facebook/wav2vec2-base-960h.
  const json w2v = {{"model_type", "wav2vec2"}, {"hidden_size", 768}, {"num_hidden_layers", 12},
                    {"num_attention_heads", 12}, {"intermediate_size", 3072},
                    {"hidden_act", "gelu"}, {"conv_dim", {512, 512, 512, 512, 512, 512, 512}},
                    {"conv_stride", {5, 2, 2, 2, 2, 2, 2}}, {"conv_kernel", {10, 3, 3, 3, 3, 2, 2}},
                    {"conv_bias", false}, {"feat_extract_norm", "group"},
                    {"feat_extract_activation", "gelu"}, {"num_conv_pos_embeddings", 128},
                    {"num_conv_pos_embedding_groups", 16}, {"do_stable_layer_norm", false},
                    {"layer_norm_eps", 1e-5}, {"vocab_size", 32}, {"pad_token_id", 0},
                    {"bos_token_id", 1}, {"eos_token_id", 2}, {"ctc_loss_reduction", "sum"},
                    {"ctc_zero_infinity", false}, {"classifier_proj_size", 256},
                    {"initializer_range", 0.02}};
  auto w2v_arch = [&](const std::string& arch) {
    json j = w2v;
    j["architectures"] = {arch};
    return j;
  };
  // A base-960h fine-tune as transformers' CTC recipe writes it (patrickvonplaten/
  // wav2vec2-base-timit-demo: ctc_loss_reduction "mean", the tokenizer's [PAD] = 31 as blank).
  json w2v_ctc = w2v_arch("Wav2Vec2ForCTC");
  w2v_ctc["ctc_loss_reduction"] = "mean";
  w2v_ctc["pad_token_id"] = 31;
  auto w2v_build = [](W2vHead head) {
    return [head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
      TS_ASSIGN_OR_RETURN(Wav2Vec2Config c, ParseWav2Vec2(spec.tiny_config));
      return std::unique_ptr<Model>(std::make_unique<Wav2Vec2Model>(std::move(spec), std::move(c), head));
    };
  };
  auto whisper_build = [](WhisperHead head) {
    return [head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
      TS_ASSIGN_OR_RETURN(WhisperConfig c, ParseWhisper(spec.tiny_config));
      return std::unique_ptr<Model>(std::make_unique<WhisperModel>(std::move(spec), std::move(c), head));
    };
  };
  json whisper_model = whisper;
  whisper_model["architectures"] = {"WhisperModel"};
  // sanchit-gandhi/whisper-small-ft-common-language-id style: whisper encoder + classifier.
  json whisper_cls = whisper;
  whisper_cls["architectures"] = {"WhisperForAudioClassification"};
  whisper_cls["classifier_proj_size"] = 256;
  whisper_cls["use_weighted_layer_sum"] = false;
  whisper_cls["num_labels"] = 2;
  return {
      {{"WhisperForConditionalGeneration", "whisper", "automatic-speech-recognition"}, whisper,
       ScaleWhisper, whisper_build(WhisperHead::kConditionalGeneration)},
      {{"WhisperModel", "whisper", "feature-extraction"}, whisper_model, ScaleWhisper,
       whisper_build(WhisperHead::kModel)},
      {{"WhisperForAudioClassification", "whisper", "audio-classification"}, whisper_cls, ScaleWhisper,
       whisper_build(WhisperHead::kAudioClassification)},
      {{"Wav2Vec2Model", "wav2vec2", "feature-extraction"}, w2v_arch("Wav2Vec2Model"),
       ScaleWav2Vec2, w2v_build(W2vHead::kBase)},
      {{"Wav2Vec2ForCTC", "wav2vec2", "automatic-speech-recognition"}, w2v_ctc,
       ScaleWav2Vec2, w2v_build(W2vHead::kCtc)},
      {{"Wav2Vec2ForSequenceClassification", "wav2vec2", "audio-classification"},
       w2v_arch("Wav2Vec2ForSequenceClassification"), ScaleWav2Vec2,
       w2v_build(W2vHead::kSequenceClassification)},
  };
}

}  // namespace ts::zoo::internal
