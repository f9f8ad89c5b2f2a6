// speech_to_text (modeling_speech_to_text.py): Speech2TextModel and
// Speech2TextForConditionalGeneration. input_features [B, frames, input_feat_per_channel x
// input_channels] (the feature extractor's log-mel filterbanks, no attention_mask here: every
// frame is speech) through Conv1dSubsampler (`encoder.conv.conv_layers.N`: Conv1d of kernel k,
// stride 2, padding k / 2, then GLU over the channels; conv_channels out until the last, which
// gives 2 x d_model), times sqrt(d_model) when `scale_embedding`, plus the fairseq sinusoid
// (Speech2TextSinusoidalPositionalEmbedding, a non-persistent buffer: computed here, not a
// weight) at positions pad + cumsum(keep) of the encoder's padding mask, which is all zeros
// without an attention_mask (keep = mask != pad_token_id: the zeros count as tokens for
// pad_token_id 1, as transformers computes it). Pre-LN encoder and decoder layers
// (`self_attn_layer_norm`, q / k / v / out_proj with biases, q scaled by head_dim^-0.5;
// the decoder's `encoder_attn` with `encoder_attn_layer_norm`; `final_layer_norm`, fc1,
// activation_function, fc2), `layer_norm` after each stack. The decoder embeds
// decoder_input_ids (`model.decoder.embed_tokens`, scaled) with the same sinusoid over its ids.
// Speech2TextForConditionalGeneration: `lm_head` tied to the decoder's embed_tokens (a state_dict
// copy; tie_word_embeddings false refused), cross entropy over labels (-100 ignored), the
// decoder input the labels shifted right after decoder_start_token_id. The model lives here: it
// shares no code path with the encoder-decoder trunk's front ends. Modelled on
// facebook/s2t-small-librispeech-asr.
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>

#include "workers/zoo/families/config_fields.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

constexpr int64_t kS2tDecoderLen = 16;

struct S2tConfig {
  int64_t vocab = 10000, d_model = 256, enc_layers = 12, dec_layers = 6, enc_heads = 4,
          dec_heads = 4, enc_ffn = 2048, dec_ffn = 2048;
  int64_t max_source = 6000, max_target = 1024, conv_channels = 1024, feat = 80, channels = 1;
  std::vector<int64_t> kernels = {5, 5};
  int64_t pad = 1, start = 2;
  Activation act = Activation::kRelu;
  bool scale = true;
};

StatusOr<S2tConfig> ParseS2t(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  S2tConfig c;
  TS_ASSIGN_OR_RETURN(c.vocab, PositiveField(r, "vocab_size", 10000));
  TS_ASSIGN_OR_RETURN(c.d_model, PositiveField(r, "d_model", 256));
  TS_ASSIGN_OR_RETURN(c.enc_layers, PositiveField(r, "encoder_layers", 12));
  TS_ASSIGN_OR_RETURN(c.dec_layers, PositiveField(r, "decoder_layers", 6));
  TS_ASSIGN_OR_RETURN(c.enc_heads, PositiveField(r, "encoder_attention_heads", 4));
  TS_ASSIGN_OR_RETURN(c.dec_heads, PositiveField(r, "decoder_attention_heads", 4));
  if (c.d_model % c.enc_heads != 0)
    return r.Error("encoder_attention_heads", "must divide d_model");
  if (c.d_model % c.dec_heads != 0)
    return r.Error("decoder_attention_heads", "must divide d_model");
  if (c.d_model < 4) return r.Error("d_model", "must be at least 4 (the sinusoid's half - 1 > 0)");
  TS_ASSIGN_OR_RETURN(c.enc_ffn, PositiveField(r, "encoder_ffn_dim", 2048));
  TS_ASSIGN_OR_RETURN(c.dec_ffn, PositiveField(r, "decoder_ffn_dim", 2048));
  TS_ASSIGN_OR_RETURN(c.max_source, PositiveField(r, "max_source_positions", 6000));
  TS_ASSIGN_OR_RETURN(c.max_target, PositiveField(r, "max_target_positions", 1024));
  TS_ASSIGN_OR_RETURN(c.conv_channels, PositiveField(r, "conv_channels", 1024));
  if (c.conv_channels % 2 != 0) return r.Error("conv_channels", "must be even (GLU halves it)");
  TS_ASSIGN_OR_RETURN(c.feat, PositiveField(r, "input_feat_per_channel", 80));
  TS_ASSIGN_OR_RETURN(c.channels, PositiveField(r, "input_channels", 1));
  TS_ASSIGN_OR_RETURN(int64_t convs, PositiveField(r, "num_conv_layers", 2));
  TS_ASSIGN_OR_RETURN(c.kernels, IntList(config, "conv_kernel_sizes", {5, 5}));
  if (static_cast<int64_t>(c.kernels.size()) != convs) {
    return r.Error("conv_kernel_sizes", "must have num_conv_layers entries");
  }
  TS_RETURN_IF_ERROR(CheckAllPositive("conv_kernel_sizes", c.kernels));
  TS_ASSIGN_OR_RETURN(std::string act, r.String("activation_function", "relu"));
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(act, "activation_function"));
  TS_ASSIGN_OR_RETURN(c.scale, r.Bool("scale_embedding", true));
  TS_ASSIGN_OR_RETURN(c.pad, TokenIdField(r, "pad_token_id", 1, c.vocab));
  TS_ASSIGN_OR_RETURN(c.start, TokenIdField(r, "decoder_start_token_id", 2, c.vocab));
  TS_ASSIGN_OR_RETURN(bool tie, r.Bool("tie_word_embeddings", true));
  if (!tie) return r.Error("tie_word_embeddings", "false is not supported (lm_head is tied)");
  return c;
}

// d_model 64 at 4 heads of 16, the FFN and conv ratios kept, one layer per stack, the kernels
// kept, 32 features per frame, 32 frames (8 encoder positions after two stride-2 convs).
StatusOr<json> ScaleS2t(const json& config) {
  TS_ASSIGN_OR_RETURN(S2tConfig c, ParseS2t(config));
  json t = config;
  const int64_t d = TinyProfile::kHidden;
  t["d_model"] = d;
  t["encoder_attention_heads"] = std::min(c.enc_heads, TinyProfile::kHeads);
  t["decoder_attention_heads"] = std::min(c.dec_heads, TinyProfile::kHeads);
  t["encoder_ffn_dim"] = ScaleRatio(c.enc_ffn, c.d_model, d, 1);
  t["decoder_ffn_dim"] = ScaleRatio(c.dec_ffn, c.d_model, d, 1);
  t["conv_channels"] = 2 * ScaleRatio(c.conv_channels / 2, c.d_model, d, 1);
  t["encoder_layers"] = TinyDepth(c.enc_layers, false);
  t["decoder_layers"] = TinyDepth(c.dec_layers, false);
  t["vocab_size"] = std::min(c.vocab, TinyProfile::kVocab);
  t["input_feat_per_channel"] = std::min<int64_t>(c.feat, 32);
  t["max_source_positions"] = std::min(c.max_source, TinyProfile::kMaxPositions);
  t["max_target_positions"] = std::min(c.max_target, TinyProfile::kMaxPositions);
  for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"}) {
    MapTokenId(t, f, t["vocab_size"].get<int64_t>());
  }
  SetTinyRunProfile(t, TinyProfile::kSeqLen);
  return t;
}

class S2tModel : public Model {
 public:
  S2tModel(ModelSpec spec, S2tConfig c, bool generation)
      : Model(std::move(spec)), c_(std::move(c)), gen_(generation) {
    const int64_t d = c_.d_model;
    int64_t in = c_.feat * c_.channels;
    for (size_t i = 0; i < c_.kernels.size(); ++i) {
      const int64_t out = i + 1 < c_.kernels.size() ? c_.conv_channels : 2 * d;
      const std::string p = "model.encoder.conv.conv_layers." + std::to_string(i);
      Add(p + ".weight", {out, in, c_.kernels[i]});
      Add(p + ".bias", {out});
      in = out / 2;
    }
    for (int64_t i = 0; i < c_.enc_layers; ++i) AddLayer("model.encoder", i, false, c_.enc_ffn);
    AddNorm("model.encoder.layer_norm");
    Add("model.decoder.embed_tokens.weight", {c_.vocab, d});
    for (int64_t i = 0; i < c_.dec_layers; ++i) AddLayer("model.decoder", i, true, c_.dec_ffn);
    AddNorm("model.decoder.layer_norm");
  }

  WeightList WeightShapes() const override { return shapes_; }

  std::vector<std::string> OutputNames() const override {
    if (gen_) return {"logits"};
    return {"last_hidden_state", "encoder_last_hidden_state"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor enc = Encode(w, GetInput(inputs, "input_features"));
    at::Tensor dec = Decode(w, GetInput(inputs, "decoder_input_ids"), enc);
    if (gen_) return {nn::Linear(dec, GetWeight(w, "model.decoder.embed_tokens.weight"))};
    return {dec, enc};
  }

  // Speech2TextForConditionalGeneration: cross entropy over the labels (-100 ignored).
  // Speech2TextModel has none: MSE of the decoder's states onto a random target.
  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    at::Tensor out = Forward(w, batch.inputs)[0];
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    if (gen_) return CrossEntropy(out.reshape({-1, out.size(-1)}), labels.reshape({-1}));
    return at::mse_loss(out, labels.to(out.scalar_type()));
  }

  // Features for RunSeqLen frames; decoder_input_ids the labels shifted right after
  // decoder_start_token_id (shift_tokens_right), the last quarter of row 1 padding (-100 in the
  // labels, pad_token_id in the decoder input).
  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    const int64_t frames = RunSeqLen(spec().tiny_config), t = kS2tDecoderLen;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    Batch batch;
    batch.inputs["input_features"] =
        at::randn({batch_size, frames, c_.feat * c_.channels}, gen, f32);
    at::Tensor labels = at::randint(0, c_.vocab, {batch_size, t}, gen, i64);
    labels = labels.masked_fill(MakeAttentionMask(batch_size, t).eq(0), -100);
    at::Tensor shifted = at::full({batch_size, t}, c_.start, i64);
    shifted.slice(1, 1, t).copy_(labels.slice(1, 0, t - 1));
    batch.inputs["decoder_input_ids"] = shifted.masked_fill(shifted.eq(-100), c_.pad);
    if (gen_) {
      batch.labels["labels"] = labels;
    } else {
      batch.labels["labels"] = at::randn({batch_size, t, c_.d_model}, gen, f32);
    }
    return batch;
  }

 private:
  void Add(const std::string& name, std::vector<int64_t> shape) {
    shapes_.push_back({name, std::move(shape)});
  }
  void AddNorm(const std::string& p) {
    Add(p + ".weight", {c_.d_model});
    Add(p + ".bias", {c_.d_model});
  }
  void AddAttention(const std::string& p) {
    for (const char* n : {"k_proj", "v_proj", "q_proj", "out_proj"}) {
      Add(p + "." + n + ".weight", {c_.d_model, c_.d_model});
      Add(p + "." + n + ".bias", {c_.d_model});
    }
  }
  void AddLayer(const std::string& stack, int64_t i, bool decoder, int64_t ffn) {
    const std::string p = stack + ".layers." + std::to_string(i) + ".";
    AddAttention(p + "self_attn");
    AddNorm(p + "self_attn_layer_norm");
    if (decoder) {
      AddAttention(p + "encoder_attn");
      AddNorm(p + "encoder_attn_layer_norm");
    }
    Add(p + "fc1.weight", {ffn, c_.d_model});
    Add(p + "fc1.bias", {ffn});
    Add(p + "fc2.weight", {c_.d_model, ffn});
    Add(p + "fc2.bias", {c_.d_model});
    AddNorm(p + "final_layer_norm");
  }

  at::Tensor Ln(const WeightMap& w, const std::string& p, const at::Tensor& x) const {
    return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), 1e-5);
  }
  at::Tensor Lin(const WeightMap& w, const std::string& p, const at::Tensor& x) const {
    return nn::Linear(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"));
  }

  // Speech2TextSinusoidalPositionalEmbedding over `ids` [B, S] (the encoder's padding mask or
  // the decoder's ids): the float32 table row pad + cumsum(ids != pad), zero on pad entries.
  at::Tensor Positions(const at::Tensor& ids, at::ScalarType dt) const {
    const int64_t half = c_.d_model / 2;
    const double step = std::log(10000.0) / static_cast<double>(half - 1);
    at::Tensor keep = ids.ne(c_.pad).to(at::kLong);
    at::Tensor pos = at::cumsum(keep, 1) * keep + c_.pad;
    at::Tensor freq = at::exp(at::arange(half, pos.options()).to(at::kFloat) * -step);
    at::Tensor arg = pos.to(at::kFloat).unsqueeze(-1) * freq;
    at::Tensor emb = at::cat({at::sin(arg), at::cos(arg)}, -1);
    if (c_.d_model % 2 == 1) emb = at::constant_pad_nd(emb, {0, 1});
    return (emb * keep.to(at::kFloat).unsqueeze(-1)).to(dt);
  }

  at::Tensor Attend(const WeightMap& w, const std::string& p, const at::Tensor& x,
                    const at::Tensor& kv, int64_t heads, bool causal) const {
    const int64_t b = x.size(0), sq = x.size(1), sk = kv.size(1), hd = c_.d_model / heads;
    at::Tensor q = Lin(w, p + ".q_proj", x).view({b, sq, heads, hd}).transpose(1, 2);
    at::Tensor k = Lin(w, p + ".k_proj", kv).view({b, sk, heads, hd}).transpose(1, 2);
    at::Tensor v = Lin(w, p + ".v_proj", kv).view({b, sk, heads, hd}).transpose(1, 2);
    at::Tensor blocked =
        causal ? nn::BlockedKeys(at::Tensor(), sq, true, std::nullopt, x.device()) : at::Tensor();
    at::Tensor ctx = nn::Attention(q, k, v, blocked, 1.0 / std::sqrt(static_cast<double>(hd)));
    return Lin(w, p + ".out_proj", ctx.transpose(1, 2).reshape({b, sq, c_.d_model}));
  }

  at::Tensor Ffn(const WeightMap& w, const std::string& p, const at::Tensor& x) const {
    at::Tensor h = Ln(w, p + "final_layer_norm", x);
    return x + Lin(w, p + "fc2", nn::Activate(Lin(w, p + "fc1", h), c_.act));
  }

  at::Tensor Encode(const WeightMap& w, const at::Tensor& features) const {
    at::Tensor x = features.transpose(1, 2);
    for (size_t i = 0; i < c_.kernels.size(); ++i) {
      const std::string p = "model.encoder.conv.conv_layers." + std::to_string(i);
      x = at::glu(nn::Conv1d(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), 2,
                             c_.kernels[i] / 2),
                  1);
    }
    x = x.transpose(1, 2);
    if (c_.scale) x = x * std::sqrt(static_cast<double>(c_.d_model));
    // No attention_mask: the padding mask is all zeros.
    const auto i64 = at::TensorOptions().dtype(at::kLong).device(x.device());
    x = x + Positions(at::zeros({x.size(0), x.size(1)}, i64), x.scalar_type());
    for (int64_t i = 0; i < c_.enc_layers; ++i) {
      const std::string p = "model.encoder.layers." + std::to_string(i) + ".";
      at::Tensor h = Ln(w, p + "self_attn_layer_norm", x);
      x = x + Attend(w, p + "self_attn", h, h, c_.enc_heads, false);
      x = Ffn(w, p, x);
    }
    return Ln(w, "model.encoder.layer_norm", x);
  }

  at::Tensor Decode(const WeightMap& w, const at::Tensor& ids, const at::Tensor& enc) const {
    at::Tensor x = nn::Embedding(GetWeight(w, "model.decoder.embed_tokens.weight"), ids, c_.pad);
    if (c_.scale) x = x * std::sqrt(static_cast<double>(c_.d_model));
    x = x + Positions(ids, x.scalar_type());
    for (int64_t i = 0; i < c_.dec_layers; ++i) {
      const std::string p = "model.decoder.layers." + std::to_string(i) + ".";
      at::Tensor h = Ln(w, p + "self_attn_layer_norm", x);
      x = x + Attend(w, p + "self_attn", h, h, c_.dec_heads, true);
      x = x + Attend(w, p + "encoder_attn", Ln(w, p + "encoder_attn_layer_norm", x), enc,
                     c_.dec_heads, false);
      x = Ffn(w, p, x);
    }
    return Ln(w, "model.decoder.layer_norm", x);
  }

  S2tConfig c_;
  bool gen_;
  WeightList shapes_;
};

ArchEntry S2tEntry(const std::string& arch, const char* task, bool generation,
                   const json& example) {
  auto build = [generation](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(S2tConfig c, ParseS2t(spec.tiny_config));
    return std::unique_ptr<Model>(new S2tModel(std::move(spec), std::move(c), generation));
  };
  return {{arch, "speech_to_text", task}, WithArchitecture(example, arch), ScaleS2t, build, {}};
}

std::vector<ArchEntry> S2tArchs() {
  // facebook/s2t-small-librispeech-asr
  const json example = {{"model_type", "speech_to_text"},
                        {"vocab_size", 10000},
                        {"d_model", 256},
                        {"encoder_layers", 12},
                        {"decoder_layers", 6},
                        {"encoder_attention_heads", 4},
                        {"decoder_attention_heads", 4},
                        {"encoder_ffn_dim", 2048},
                        {"decoder_ffn_dim", 2048},
                        {"activation_function", "relu"},
                        {"scale_embedding", true},
                        {"max_source_positions", 6000},
                        {"max_target_positions", 1024},
                        {"num_conv_layers", 2},
                        {"conv_kernel_sizes", {5, 5}},
                        {"conv_channels", 1024},
                        {"input_feat_per_channel", 80},
                        {"input_channels", 1},
                        {"pad_token_id", 1},
                        {"bos_token_id", 0},
                        {"eos_token_id", 2},
                        {"decoder_start_token_id", 2},
                        {"tie_word_embeddings", true},
                        {"init_std", 0.02}};
  return {S2tEntry("Speech2TextForConditionalGeneration", "automatic-speech-recognition", true,
                   example),
          S2tEntry("Speech2TextModel", "feature-extraction", false, example)};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(SpeechToText, S2tArchs);

}  // namespace ts::zoo::internal
