// Zoo: encoder-decoder families (README.md).
//   t5 / mt5   T5LayerNorm (RMS, no bias), unscaled q k^T, relative position bias buckets
//              (bidirectional in the encoder, causal in the decoder) owned by block 0 of each
//              stack and shared by all its blocks; DenseReluDense (relu) or gated
//              (feed_forward_proj "gated-gelu": wi_0 / wi_1, gelu_new); tied lm_head scales the
//              decoder output by d_model**-0.5. Classes: ForConditionalGeneration, Model,
//              EncoderModel.
//   bart / mbart: learned positions (offset 2), layernorm_embedding, optional sqrt(d_model)
//              embedding scale, q/k/v/out biases, gelu fc1/fc2; bart post-LN, mbart pre-LN with
//              final encoder/decoder layer_norm; lm_head tied to shared + final_logits_bias.
//              Classes: ForConditionalGeneration, Model, ForSequenceClassification (decoder
//              state at the last eos of input_ids; dense, tanh, out_proj), ForQuestionAnswering.
// Inputs: input_ids, attention_mask, decoder_input_ids (labels shifted right with
// decoder_start_token_id); labels for the loss (cross entropy, ignore -100).
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;
using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

enum class S2SHead { kConditionalGeneration, kModel, kEncoderModel, kTokenClassification };

Status Positive(const ConfigReader& r, const std::string& f, int64_t v) {
  if (v <= 0) return r.Error(f, "must be positive (got " + std::to_string(v) + ")");
  return OkStatus();
}

// `name`, or its transformers attribute_map alias when only that is present.
StatusOr<int64_t> IntAlias(const ConfigReader& r, const std::string& name, const std::string& alias) {
  if (!r.Has(name) && r.Has(alias)) return r.Int(alias);
  return r.Int(name);
}

StatusOr<int64_t> TokenId(const ConfigReader& r, const std::string& f, int64_t def, int64_t vocab) {
  TS_ASSIGN_OR_RETURN(int64_t v, r.Int(f, def));
  if (v < 0 || v >= vocab) {
    return r.Error(f, "must be in [0, vocab_size) (got " + std::to_string(v) + ")");
  }
  return v;
}

// Shift right: [start, labels[:, :-1]] with -100 replaced by pad (HF _shift_right).
at::Tensor ShiftRight(const at::Tensor& labels, int64_t start, int64_t pad) {
  at::Tensor first = at::full({labels.size(0), 1}, start, labels.options());
  at::Tensor out = at::cat({first, labels.narrow(1, 0, labels.size(1) - 1)}, 1);
  return out.masked_fill(out.eq(-100), pad);
}

// ---------------------------------------------------------------------------------------- T5

struct T5Cfg {
  int64_t vocab = 0, d_model = 0, d_kv = 0, d_ff = 0, layers = 0, dec_layers = 0, heads = 0;
  int64_t buckets = 32, max_distance = 128;
  double eps = 1e-6;
  bool gated = false;
  Activation act = Activation::kRelu;
  bool tie = true;
  int64_t pad = 0, eos = 1, start = 0;
  int64_t num_labels = 2;
};

StatusOr<T5Cfg> ParseT5(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  T5Cfg c;
  TS_ASSIGN_OR_RETURN(c.vocab, r.Int("vocab_size"));
  TS_RETURN_IF_ERROR(Positive(r, "vocab_size", c.vocab));
  TS_ASSIGN_OR_RETURN(c.d_model, IntAlias(r, "d_model", "hidden_size"));
  TS_RETURN_IF_ERROR(Positive(r, "d_model", c.d_model));
  TS_ASSIGN_OR_RETURN(c.heads, IntAlias(r, "num_heads", "num_attention_heads"));
  TS_RETURN_IF_ERROR(Positive(r, "num_heads", c.heads));
  TS_ASSIGN_OR_RETURN(c.layers, IntAlias(r, "num_layers", "num_hidden_layers"));
  TS_RETURN_IF_ERROR(Positive(r, "num_layers", c.layers));
  TS_ASSIGN_OR_RETURN(c.dec_layers, r.Int("num_decoder_layers", c.layers));
  TS_RETURN_IF_ERROR(Positive(r, "num_decoder_layers", c.dec_layers));
  TS_ASSIGN_OR_RETURN(c.d_ff, r.Int("d_ff", 2048));  // T5Config default
  TS_RETURN_IF_ERROR(Positive(r, "d_ff", c.d_ff));
  TS_ASSIGN_OR_RETURN(c.d_kv, r.Int("d_kv", 64));
  TS_RETURN_IF_ERROR(Positive(r, "d_kv", c.d_kv));
  TS_ASSIGN_OR_RETURN(c.buckets, r.Int("relative_attention_num_buckets", 32));
  if (c.buckets < 2) {
    return r.Error("relative_attention_num_buckets", "must be >= 2 (got " + std::to_string(c.buckets) + ")");
  }
  TS_ASSIGN_OR_RETURN(c.max_distance, r.Int("relative_attention_max_distance", 128));
  if (c.max_distance <= c.buckets / 4) {
    return r.Error("relative_attention_max_distance",
                   "must exceed relative_attention_num_buckets / 4 (got " +
                       std::to_string(c.max_distance) + ")");
  }
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_epsilon", 1e-6));
  if (!(c.eps > 0.0) || !std::isfinite(c.eps)) return r.Error("layer_norm_epsilon", "must be positive");
  TS_ASSIGN_OR_RETURN(std::string ff, r.String("feed_forward_proj", "relu"));
  std::string act = ff;
  if (ff.rfind("gated-", 0) == 0) {
    c.gated = true;
    act = ff.substr(6);
  } else if (ff.find('-') != std::string::npos) {
    return r.Error("feed_forward_proj", "unknown '" + ff + "'");
  }
  if (act == "gelu") act = "gelu_new";  // T5Config: gated-gelu means gelu_new
  auto parsed = ParseActivation(act, r.Name("feed_forward_proj"));
  if (!parsed.ok()) return r.Error("feed_forward_proj", "unknown '" + ff + "'");
  c.act = *parsed;
  TS_ASSIGN_OR_RETURN(c.tie, r.Bool("tie_word_embeddings", true));
  TS_ASSIGN_OR_RETURN(c.pad, TokenId(r, "pad_token_id", 0, c.vocab));
  TS_ASSIGN_OR_RETURN(c.eos, TokenId(r, "eos_token_id", 1, c.vocab));
  TS_ASSIGN_OR_RETURN(c.start, TokenId(r, "decoder_start_token_id", c.pad, c.vocab));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleT5(const json& config) {
  using P = TinyProfile;
  TS_ASSIGN_OR_RETURN(T5Cfg c, ParseT5(config));
  json t = config;
  for (const char* a : {"hidden_size", "num_attention_heads", "num_hidden_layers"}) t.erase(a);
  const int64_t heads = std::min(c.heads, P::kHeads);
  const int64_t d_kv = P::kHidden / heads;
  t["num_heads"] = heads;
  t["d_kv"] = d_kv;
  t["d_model"] = heads * d_kv;
  t["d_ff"] = ScaleRatio(c.d_ff, c.d_model, heads * d_kv, 8);
  t["num_layers"] = TinyDepth(c.layers, false);
  t["num_decoder_layers"] = TinyDepth(c.dec_layers, false);
  // 32 buckets / distance 128 -> 8 / 32: log-spaced buckets still bite within 32 tokens.
  const int64_t b = std::max<int64_t>(4, c.buckets / 4);
  t["relative_attention_num_buckets"] = b;
  t["relative_attention_max_distance"] = std::max<int64_t>(b, ScaleRatio(c.max_distance, c.buckets, b, 2));
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t["vocab_size"] = vocab;
  for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"})
    MapTokenId(t, f, vocab);
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, P::kSeqLen);
  return t;
}

// HF T5Attention._relative_position_bucket for relative_position = key - query: [Sq, Sk] int64,
// built with tensor ops on `dev` (traceable; no host constants).
at::Tensor T5Buckets(int64_t sq, int64_t sk, bool bidirectional, int64_t num_buckets,
                     int64_t max_distance, const at::Device& dev) {
  auto lo = at::TensorOptions().dtype(at::kLong).device(dev);
  at::Tensor rp = at::arange(sk, lo).unsqueeze(0) - at::arange(sq, lo).unsqueeze(1);
  int64_t nb = num_buckets;
  at::Tensor bucket = at::zeros_like(rp);
  if (bidirectional) {
    nb /= 2;
    bucket = rp.gt(0).to(at::kLong) * nb;
    rp = rp.abs();
  } else {
    rp = -at::clamp_max(rp, 0);
  }
  const int64_t max_exact = nb / 2;
  at::Tensor lf = rp.clamp_min(1).to(at::kFloat) / static_cast<double>(max_exact);
  const double denom = std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact));
  at::Tensor large = (at::log(lf) / denom * static_cast<double>(nb - max_exact)).to(at::kLong) + max_exact;
  large = at::clamp_max(large, nb - 1);
  return bucket + at::where(rp.lt(max_exact), rp, large);
}

struct T5Attn {
  std::string q, k, v, o;
};
struct T5Block {
  std::string ln0, ln1, ln2, wi, wi0, wi1, wo;
  T5Attn self, cross;
};

class T5Impl : public Model {
 public:
  T5Impl(ModelSpec spec, T5Cfg c, S2SHead head) : Model(std::move(spec)), c_(c), head_(head) {
    const int64_t d = c_.d_model, inner = c_.heads * c_.d_kv, ff = c_.d_ff;
    auto add = [this](const std::string& name, std::vector<int64_t> shape) {
      shapes_.emplace_back(name, std::move(shape));
      return name;
    };
    // T5ForTokenClassification wraps a T5EncoderModel as `transformer`.
    const std::string pre = head_ == S2SHead::kTokenClassification ? "transformer." : "";
    shared_ = add(pre + "shared.weight", {c_.vocab, d});
    auto stack = [&](const std::string& p, int64_t n, bool decoder, std::vector<T5Block>& blocks,
                     std::string& rel, std::string& final_ln) {
      for (int64_t i = 0; i < n; ++i) {
        const std::string bp = p + ".block." + std::to_string(i) + ".layer.";
        T5Block b;
        auto attn = [&](const std::string& ap, T5Attn& a) {
          a.q = add(ap + ".q.weight", {inner, d});
          a.k = add(ap + ".k.weight", {inner, d});
          a.v = add(ap + ".v.weight", {inner, d});
          a.o = add(ap + ".o.weight", {d, inner});
        };
        attn(bp + "0.SelfAttention", b.self);
        if (i == 0) rel = add(bp + "0.SelfAttention.relative_attention_bias.weight", {c_.buckets, c_.heads});
        b.ln0 = add(bp + "0.layer_norm.weight", {d});
        std::string ffp = bp + "1.";
        if (decoder) {
          attn(bp + "1.EncDecAttention", b.cross);
          b.ln1 = add(bp + "1.layer_norm.weight", {d});
          ffp = bp + "2.";
        }
        if (c_.gated) {
          b.wi0 = add(ffp + "DenseReluDense.wi_0.weight", {ff, d});
          b.wi1 = add(ffp + "DenseReluDense.wi_1.weight", {ff, d});
        } else {
          b.wi = add(ffp + "DenseReluDense.wi.weight", {ff, d});
        }
        b.wo = add(ffp + "DenseReluDense.wo.weight", {d, ff});
        b.ln2 = add(ffp + "layer_norm.weight", {d});
        blocks.push_back(std::move(b));
      }
      final_ln = add(p + ".final_layer_norm.weight", {d});
    };
    stack(pre + "encoder", c_.layers, false, enc_, enc_rel_, enc_ln_);
    const bool encoder_only = head_ == S2SHead::kEncoderModel || head_ == S2SHead::kTokenClassification;
    if (!encoder_only) stack("decoder", c_.dec_layers, true, dec_, dec_rel_, dec_ln_);
    if (head_ == S2SHead::kTokenClassification) {
      cls_ = add("classifier.weight", {c_.num_labels, d});
      cls_b_ = add("classifier.bias", {c_.num_labels});
    }
    if (head_ == S2SHead::kConditionalGeneration && !c_.tie) lm_head_ = add("lm_head.weight", {c_.vocab, d});
    seq_len_ = RunSeqLen(this->spec().tiny_config);
  }

  Shapes WeightShapes() const override { return shapes_; }
  std::vector<std::string> OutputNames() const override {
    switch (head_) {
      case S2SHead::kConditionalGeneration: return {"logits", "encoder_last_hidden_state"};
      case S2SHead::kModel: return {"last_hidden_state", "encoder_last_hidden_state"};
      case S2SHead::kTokenClassification: return {"logits"};
      default: return {"last_hidden_state"};
    }
  }

  // [B, S] bucket table -> position bias [1, H, Sq, Sk].
  at::Tensor PositionBias(const at::Tensor& table, int64_t sq, int64_t sk, bool bidirectional,
                          const at::Device& dev) const {
    at::Tensor idx = T5Buckets(sq, sk, bidirectional, c_.buckets, c_.max_distance, dev);
    return nn::Embedding(table, idx).permute({2, 0, 1}).unsqueeze(0);
  }

  // T5Attention: no 1/sqrt(d) scaling; `bias` [.., H, Sq, Sk] added before the mask.
  at::Tensor Attend(const WeightMap& w, const T5Attn& a, const at::Tensor& x, const at::Tensor& kv,
                    const at::Tensor& bias, const at::Tensor& blocked) const {
    const int64_t b = x.size(0), sq = x.size(1), sk = kv.size(1), nh = c_.heads, dk = c_.d_kv;
    at::Tensor q = nn::Linear(x, GetWeight(w, a.q)).view({b, sq, nh, dk}).transpose(1, 2);
    at::Tensor k = nn::Linear(kv, GetWeight(w, a.k)).view({b, sk, nh, dk}).transpose(1, 2);
    at::Tensor v = nn::Linear(kv, GetWeight(w, a.v)).view({b, sk, nh, dk}).transpose(1, 2);
    at::Tensor scores = nn::Matmul(q, k.transpose(-1, -2));
    if (bias.defined()) scores = scores + bias;
    const double lowest = scores.scalar_type() == at::kDouble ? std::numeric_limits<double>::lowest()
                                                              : std::numeric_limits<float>::lowest();
    if (blocked.defined()) scores = scores.masked_fill(blocked, lowest);
    at::Tensor ctx = nn::Matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({b, sq, nh * dk});
    return nn::Linear(ctx, GetWeight(w, a.o));
  }

  at::Tensor Ffn(const WeightMap& w, const T5Block& blk, const at::Tensor& x) const {
    at::Tensor hdn;
    if (c_.gated) {
      hdn = nn::Activate(nn::Linear(x, GetWeight(w, blk.wi0)), c_.act) * nn::Linear(x, GetWeight(w, blk.wi1));
    } else {
      hdn = nn::Activate(nn::Linear(x, GetWeight(w, blk.wi)), c_.act);
    }
    return nn::Linear(hdn, GetWeight(w, blk.wo));
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& ids = GetInput(inputs, "input_ids");
    at::Tensor mask = GetOptionalInput(inputs, "attention_mask");
    const at::Device dev = ids.device();
    const int64_t s = ids.size(1);
    at::Tensor x = nn::Embedding(GetWeight(w, shared_), ids);
    at::Tensor enc_block = nn::BlockedKeys(mask, s, false, std::nullopt, dev);
    at::Tensor bias = PositionBias(GetWeight(w, enc_rel_), s, s, true, dev);
    for (const T5Block& blk : enc_) {
      x = x + Attend(w, blk.self, nn::RmsNorm(x, GetWeight(w, blk.ln0), c_.eps),
                     nn::RmsNorm(x, GetWeight(w, blk.ln0), c_.eps), bias, enc_block);
      x = x + Ffn(w, blk, nn::RmsNorm(x, GetWeight(w, blk.ln2), c_.eps));
    }
    at::Tensor enc = nn::RmsNorm(x, GetWeight(w, enc_ln_), c_.eps);
    if (head_ == S2SHead::kEncoderModel) return {enc};
    if (head_ == S2SHead::kTokenClassification) {
      return {nn::Linear(enc, GetWeight(w, cls_), GetWeight(w, cls_b_))};
    }
    const at::Tensor& dids = GetInput(inputs, "decoder_input_ids");
    const int64_t t = dids.size(1);
    at::Tensor y = nn::Embedding(GetWeight(w, shared_), dids);
    at::Tensor causal = nn::BlockedKeys(at::Tensor(), t, true, std::nullopt, dev);
    at::Tensor dbias = PositionBias(GetWeight(w, dec_rel_), t, t, false, dev);
    for (const T5Block& blk : dec_) {
      at::Tensor n0 = nn::RmsNorm(y, GetWeight(w, blk.ln0), c_.eps);
      y = y + Attend(w, blk.self, n0, n0, dbias, causal);
      y = y + Attend(w, blk.cross, nn::RmsNorm(y, GetWeight(w, blk.ln1), c_.eps), enc, at::Tensor(),
                     enc_block);
      y = y + Ffn(w, blk, nn::RmsNorm(y, GetWeight(w, blk.ln2), c_.eps));
    }
    y = nn::RmsNorm(y, GetWeight(w, dec_ln_), c_.eps);
    if (head_ == S2SHead::kModel) return {y, enc};
    at::Tensor logits = c_.tie ? nn::Linear(y * std::pow(static_cast<double>(c_.d_model), -0.5),
                                            GetWeight(w, shared_))
                               : nn::Linear(y, GetWeight(w, lm_head_));
    return {logits, enc};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    if (head_ == S2SHead::kConditionalGeneration) {
      return CrossEntropy(out[0].reshape({-1, c_.vocab}), labels.reshape({-1}));
    }
    if (head_ == S2SHead::kTokenClassification) {
      return CrossEntropy(out[0].reshape({-1, c_.num_labels}), labels.reshape({-1}));
    }
    return at::mse_loss(out[0], labels.to(out[0].scalar_type()));
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    const int64_t s = seq_len_, t = std::max<int64_t>(2, s / 2);
    at::Tensor ids = at::randint(0, c_.vocab, {batch_size, s}, gen, lopts);
    at::Tensor mask = MakeAttentionMask(batch_size, s);
    ids = ids.masked_fill(mask.eq(0), c_.pad);
    Batch batch;
    batch.inputs["input_ids"] = ids;
    batch.inputs["attention_mask"] = mask;
    at::Tensor labels = at::randint(0, c_.vocab, {batch_size, t}, gen, lopts);
    labels = labels.masked_fill(MakeAttentionMask(batch_size, t).eq(0), -100);
    if (head_ == S2SHead::kTokenClassification) {
      batch.labels["labels"] =
          at::randint(0, c_.num_labels, {batch_size, s}, gen, lopts).masked_fill(mask.eq(0), -100);
      return batch;
    }
    if (head_ != S2SHead::kEncoderModel) batch.inputs["decoder_input_ids"] = ShiftRight(labels, c_.start, c_.pad);
    if (head_ == S2SHead::kConditionalGeneration) {
      batch.labels["labels"] = labels;
    } else {
      const int64_t len = head_ == S2SHead::kModel ? t : s;
      batch.labels["labels"] = at::randn({batch_size, len, c_.d_model}, gen, at::TensorOptions().dtype(at::kFloat));
    }
    return batch;
  }

 private:
  T5Cfg c_;
  S2SHead head_;
  Shapes shapes_;
  std::vector<T5Block> enc_, dec_;
  std::string shared_, enc_rel_, dec_rel_, enc_ln_, dec_ln_, lm_head_, cls_, cls_b_;
  int64_t seq_len_ = 32;
};

// -------------------------------------------------------------------------------- BART / mBART

enum class BartHead {
  kConditionalGeneration, kModel, kSequenceClassification, kQuestionAnswering, kCausalLM
};

struct BartCfg {
  int64_t vocab = 0, d_model = 0, enc_layers = 0, dec_layers = 0, enc_heads = 0, dec_heads = 0;
  int64_t enc_ffn = 0, dec_ffn = 0, max_pos = 1024, num_labels = 3;
  int64_t pad = 1, eos = 2, start = 2;
  Activation act = Activation::kGeluErf;
  bool scale_embedding = false, tie = true;
  bool pre_ln = false;  // mbart: pre-LN layers and final encoder/decoder layer_norm
};

StatusOr<BartCfg> ParseBart(const json& config, bool mbart) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  BartCfg c;
  c.pre_ln = mbart;
  auto pos = [&](const std::string& f, int64_t& out, std::optional<int64_t> def) -> Status {
    StatusOr<int64_t> v = def ? r.Int(f, *def) : r.Int(f);
    if (!v.ok()) return v.status();
    TS_RETURN_IF_ERROR(Positive(r, f, *v));
    out = *v;
    return OkStatus();
  };
  TS_RETURN_IF_ERROR(pos("vocab_size", c.vocab, std::nullopt));
  TS_RETURN_IF_ERROR(pos("d_model", c.d_model, std::nullopt));
  TS_RETURN_IF_ERROR(pos("encoder_layers", c.enc_layers, std::nullopt));
  TS_RETURN_IF_ERROR(pos("decoder_layers", c.dec_layers, std::nullopt));
  TS_RETURN_IF_ERROR(pos("encoder_attention_heads", c.enc_heads, std::nullopt));
  TS_RETURN_IF_ERROR(pos("decoder_attention_heads", c.dec_heads, std::nullopt));
  for (const char* f : {"encoder_attention_heads", "decoder_attention_heads"}) {
    const int64_t h = std::string(f) == "encoder_attention_heads" ? c.enc_heads : c.dec_heads;
    if (c.d_model % h != 0) {
      return r.Error(f, "must divide d_model (" + std::to_string(c.d_model) + " % " +
                            std::to_string(h) + " != 0)");
    }
  }
  TS_RETURN_IF_ERROR(pos("encoder_ffn_dim", c.enc_ffn, 4096));
  TS_RETURN_IF_ERROR(pos("decoder_ffn_dim", c.dec_ffn, 4096));
  TS_RETURN_IF_ERROR(pos("max_position_embeddings", c.max_pos, 1024));
  TS_ASSIGN_OR_RETURN(std::string act, r.String("activation_function", "gelu"));
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(act, r.Name("activation_function")));
  TS_ASSIGN_OR_RETURN(c.scale_embedding, r.Bool("scale_embedding", false));
  TS_ASSIGN_OR_RETURN(c.tie, r.Bool("tie_word_embeddings", true));
  TS_ASSIGN_OR_RETURN(c.pad, TokenId(r, "pad_token_id", 1, c.vocab));
  TS_ASSIGN_OR_RETURN(c.eos, TokenId(r, "eos_token_id", 2, c.vocab));
  TS_ASSIGN_OR_RETURN(c.start, TokenId(r, "decoder_start_token_id", c.eos, c.vocab));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleBart(const json& config, bool mbart) {
  using P = TinyProfile;
  TS_ASSIGN_OR_RETURN(BartCfg c, ParseBart(config, mbart));
  json t = config;
  const int64_t heads = std::min(c.enc_heads, P::kHeads);
  const int64_t d = heads * (P::kHidden / P::kHeads);
  int64_t dec_heads = std::min(c.dec_heads, P::kHeads);
  if (d % dec_heads != 0) dec_heads = heads;
  t["d_model"] = d;
  t["encoder_attention_heads"] = heads;
  t["decoder_attention_heads"] = dec_heads;
  t["encoder_ffn_dim"] = ScaleRatio(c.enc_ffn, c.d_model, d, 8);
  t["decoder_ffn_dim"] = ScaleRatio(c.dec_ffn, c.d_model, d, 8);
  t["encoder_layers"] = TinyDepth(c.enc_layers, false);
  t["decoder_layers"] = TinyDepth(c.dec_layers, false);
  t["num_hidden_layers"] = TinyDepth(c.enc_layers, false);
  t["max_position_embeddings"] = std::min(c.max_pos, P::kMaxPositions);
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t["vocab_size"] = vocab;
  for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
                        "forced_bos_token_id", "forced_eos_token_id"})
    MapTokenId(t, f, vocab);
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, std::min(P::kSeqLen, std::min(c.max_pos, P::kMaxPositions)));
  return t;
}

class BartImpl : public Model {
 public:
  BartImpl(ModelSpec spec, BartCfg c, BartHead head) : Model(std::move(spec)), c_(c), head_(head) {
    const int64_t d = c_.d_model;
    pre_ = head_ == BartHead::kModel ? "" : "model.";
    // BartForCausalLM: the decoder alone (BartDecoderWrapper), its own embed_tokens; its layers'
    // encoder_attn is never called without encoder states and is not built.
    const bool causal = head_ == BartHead::kCausalLM;
    if (causal) {
      Add("model.decoder.embed_tokens.weight", {c_.vocab, d});
    } else {
      Add(pre_ + "shared.weight", {c_.vocab, d});
    }
    for (const char* stack : {"encoder", "decoder"}) {
      const std::string sp = pre_ + stack + ".";
      const bool dec = std::string(stack) == "decoder";
      if (causal && !dec) continue;
      Add(sp + "embed_positions.weight", {c_.max_pos + 2, d});
      AddLn(sp + "layernorm_embedding");
      for (int64_t i = 0; i < (dec ? c_.dec_layers : c_.enc_layers); ++i) {
        const std::string lp = sp + "layers." + std::to_string(i) + ".";
        AddAttn(lp + "self_attn");
        AddLn(lp + "self_attn_layer_norm");
        if (dec && !causal) {
          AddAttn(lp + "encoder_attn");
          AddLn(lp + "encoder_attn_layer_norm");
        }
        const int64_t ff = dec ? c_.dec_ffn : c_.enc_ffn;
        AddLinear(lp + "fc1", ff, d);
        AddLinear(lp + "fc2", d, ff);
        AddLn(lp + "final_layer_norm");
      }
      if (c_.pre_ln) AddLn(sp + "layer_norm");
    }
    switch (head_) {
      case BartHead::kConditionalGeneration:
        Add("final_logits_bias", {1, c_.vocab});
        if (!c_.tie) Add("lm_head.weight", {c_.vocab, d});
        break;
      case BartHead::kSequenceClassification:
        AddLinear("classification_head.dense", d, d);
        AddLinear("classification_head.out_proj", c_.num_labels, d);
        break;
      case BartHead::kQuestionAnswering:
        AddLinear("qa_outputs", 2, d);
        break;
      case BartHead::kCausalLM:
        if (!c_.tie) Add("lm_head.weight", {c_.vocab, d});
        break;
      default:
        break;
    }
    seq_len_ = RunSeqLen(this->spec().tiny_config);
  }

  Shapes WeightShapes() const override { return shapes_; }
  std::vector<std::string> OutputNames() const override {
    switch (head_) {
      case BartHead::kConditionalGeneration: return {"logits", "encoder_last_hidden_state"};
      case BartHead::kModel: return {"last_hidden_state", "encoder_last_hidden_state"};
      case BartHead::kSequenceClassification: return {"logits"};
      case BartHead::kCausalLM: return {"logits"};
      default: return {"start_logits", "end_logits"};
    }
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& ids = GetInput(inputs, "input_ids");
    at::Tensor mask = GetOptionalInput(inputs, "attention_mask");
    const at::Device dev = ids.device();
    if (head_ == BartHead::kCausalLM) return {CausalForward(w, ids, mask)};
    const at::Tensor& shared = GetWeight(w, pre_ + "shared.weight");
    at::Tensor enc_block = nn::BlockedKeys(mask, ids.size(1), false, std::nullopt, dev);
    at::Tensor x = Embed(w, pre_ + "encoder.", shared, ids);
    for (int64_t i = 0; i < c_.enc_layers; ++i) {
      const std::string lp = pre_ + "encoder.layers." + std::to_string(i) + ".";
      x = Residual(w, lp + "self_attn_layer_norm", x, [&](const at::Tensor& y) {
        return Attend(w, lp + "self_attn.", y, y, c_.enc_heads, enc_block);
      });
      x = Residual(w, lp + "final_layer_norm", x, [&](const at::Tensor& y) { return Ffn(w, lp, y); });
    }
    if (c_.pre_ln) x = Ln(w, pre_ + "encoder.layer_norm", x);
    const at::Tensor enc = x;

    const at::Tensor& dids = GetInput(inputs, "decoder_input_ids");
    at::Tensor causal = nn::BlockedKeys(GetOptionalInput(inputs, "decoder_attention_mask"),
                                        dids.size(1), true, std::nullopt, dev);
    at::Tensor y = Embed(w, pre_ + "decoder.", shared, dids);
    for (int64_t i = 0; i < c_.dec_layers; ++i) {
      const std::string lp = pre_ + "decoder.layers." + std::to_string(i) + ".";
      y = Residual(w, lp + "self_attn_layer_norm", y, [&](const at::Tensor& z) {
        return Attend(w, lp + "self_attn.", z, z, c_.dec_heads, causal);
      });
      y = Residual(w, lp + "encoder_attn_layer_norm", y, [&](const at::Tensor& z) {
        return Attend(w, lp + "encoder_attn.", z, enc, c_.dec_heads, enc_block);
      });
      y = Residual(w, lp + "final_layer_norm", y, [&](const at::Tensor& z) { return Ffn(w, lp, z); });
    }
    if (c_.pre_ln) y = Ln(w, pre_ + "decoder.layer_norm", y);

    switch (head_) {
      case BartHead::kModel: return {y, enc};
      case BartHead::kConditionalGeneration: {
        at::Tensor logits = nn::Linear(y, c_.tie ? shared : GetWeight(w, "lm_head.weight")) +
                            GetWeight(w, "final_logits_bias");
        return {logits, enc};
      }
      case BartHead::kSequenceClassification: {
        // HF pools the decoder state at the last eos token of input_ids.
        const int64_t b = ids.size(0), s = ids.size(1);
        at::Tensor idx = at::arange(s, at::TensorOptions().dtype(at::kLong).device(dev));
        at::Tensor last = (idx * ids.eq(c_.eos).to(at::kLong)).argmax(-1);
        at::Tensor pooled = y.gather(1, last.view({b, 1, 1}).expand({b, 1, c_.d_model})).squeeze(1);
        at::Tensor hdn = at::tanh(Lin(w, "classification_head.dense", pooled));
        return {Lin(w, "classification_head.out_proj", hdn)};
      }
      default: {
        at::Tensor logits = Lin(w, "qa_outputs", y);
        return {logits.select(-1, 0), logits.select(-1, 1)};
      }
    }
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    switch (head_) {
      case BartHead::kConditionalGeneration:
        return CrossEntropy(out[0].reshape({-1, c_.vocab}), GetInput(batch.labels, "labels").reshape({-1}));
      case BartHead::kModel:
        return at::mse_loss(out[0], GetInput(batch.labels, "labels").to(out[0].scalar_type()));
      case BartHead::kCausalLM: {
        const at::Tensor& labels = GetInput(batch.labels, "labels");
        const int64_t s = out[0].size(1);
        return CrossEntropy(out[0].narrow(1, 0, s - 1).reshape({-1, c_.vocab}),
                            labels.narrow(1, 1, s - 1).reshape({-1}));
      }
      case BartHead::kSequenceClassification: {
        const at::Tensor& labels = GetInput(batch.labels, "labels");
        if (c_.num_labels == 1) return at::mse_loss(out[0].squeeze(-1), labels.to(out[0].scalar_type()));
        return CrossEntropy(out[0], labels);
      }
      default:
        return (CrossEntropy(out[0], GetInput(batch.labels, "start_positions")) +
                CrossEntropy(out[1], GetInput(batch.labels, "end_positions"))) / 2;
    }
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    const int64_t s = seq_len_, t = std::max<int64_t>(2, s / 2);
    // Ordinary tokens avoid pad / eos / start; each row ends (before its padding) with eos.
    auto tokens = [&](int64_t rows, int64_t len) {
      at::Tensor v = at::randint(0, c_.vocab, {rows, len}, gen, lopts);
      at::Tensor special = v.eq(c_.pad) | v.eq(c_.eos) | v.eq(c_.start);
      return v.masked_fill(special, (std::max({c_.pad, c_.eos, c_.start}) + 1) % c_.vocab);
    };
    auto with_eos = [&](at::Tensor v, const at::Tensor& mask) {
      at::Tensor last = mask.sum(-1) - 1;
      v.scatter_(1, last.unsqueeze(1), c_.eos);
      return v.masked_fill(mask.eq(0), c_.pad);
    };
    at::Tensor mask = MakeAttentionMask(batch_size, s);
    at::Tensor ids = with_eos(tokens(batch_size, s), mask);
    Batch batch;
    batch.inputs["input_ids"] = ids;
    batch.inputs["attention_mask"] = mask;
    if (head_ == BartHead::kCausalLM) {
      batch.labels["labels"] = ids.masked_fill(mask.eq(0), -100);
      return batch;
    }
    if (head_ == BartHead::kSequenceClassification || head_ == BartHead::kQuestionAnswering) {
      // HF: decoder_input_ids default to input_ids shifted right.
      batch.inputs["decoder_input_ids"] = Shift(ids);
      if (head_ == BartHead::kSequenceClassification) {
        batch.labels["labels"] = c_.num_labels == 1
                                     ? at::randn({batch_size}, gen, at::TensorOptions().dtype(at::kFloat))
                                     : at::randint(0, c_.num_labels, {batch_size}, gen, lopts);
      } else {
        batch.labels["start_positions"] = at::randint(0, s / 2, {batch_size}, gen, lopts);
        batch.labels["end_positions"] = at::randint(s / 2, s - s / 4, {batch_size}, gen, lopts);
      }
      return batch;
    }
    at::Tensor dmask = MakeAttentionMask(batch_size, t);
    at::Tensor labels = with_eos(tokens(batch_size, t), dmask);
    batch.inputs["decoder_input_ids"] = Shift(labels);
    if (head_ == BartHead::kConditionalGeneration) {
      batch.labels["labels"] = labels.masked_fill(dmask.eq(0), -100);
    } else {
      batch.labels["labels"] = at::randn({batch_size, t, c_.d_model}, gen, at::TensorOptions().dtype(at::kFloat));
    }
    return batch;
  }

 private:
  void Add(const std::string& name, std::vector<int64_t> shape) { shapes_.emplace_back(name, std::move(shape)); }
  void AddLinear(const std::string& p, int64_t out, int64_t in) {
    Add(p + ".weight", {out, in});
    Add(p + ".bias", {out});
  }
  void AddLn(const std::string& p) {
    Add(p + ".weight", {c_.d_model});
    Add(p + ".bias", {c_.d_model});
  }
  void AddAttn(const std::string& p) {
    for (const char* n : {".k_proj", ".v_proj", ".q_proj", ".out_proj"}) AddLinear(p + n, c_.d_model, c_.d_model);
  }
  at::Tensor Ln(const WeightMap& w, const std::string& p, const at::Tensor& x) const {
    return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), 1e-5);
  }
  at::Tensor Lin(const WeightMap& w, const std::string& p, const at::Tensor& x) const {
    return nn::Linear(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"));
  }
  // Post-LN (bart): LN(x + f(x)); pre-LN (mbart): x + f(LN(x)).
  template <typename F>
  at::Tensor Residual(const WeightMap& w, const std::string& ln, const at::Tensor& x, F f) const {
    if (c_.pre_ln) return x + f(Ln(w, ln, x));
    return Ln(w, ln, x + f(x));
  }
  // embed_tokens * embed_scale + learned positions (offset 2), then layernorm_embedding.
  at::Tensor Embed(const WeightMap& w, const std::string& sp, const at::Tensor& shared,
                   const at::Tensor& ids) const {
    at::Tensor x = nn::Embedding(shared, ids);
    if (c_.scale_embedding) x = x * std::sqrt(static_cast<double>(c_.d_model));
    at::Tensor posw = GetWeight(w, sp + "embed_positions.weight");
    at::Tensor positions = at::arange(ids.size(1), at::TensorOptions().dtype(at::kLong).device(ids.device())) + 2;
    x = x + nn::Embedding(posw, positions);
    return Ln(w, sp + "layernorm_embedding", x);
  }
  at::Tensor Attend(const WeightMap& w, const std::string& p, const at::Tensor& x, const at::Tensor& kv,
                    int64_t heads, const at::Tensor& blocked) const {
    const int64_t b = x.size(0), sq = x.size(1), sk = kv.size(1), d = c_.d_model, hd = d / heads;
    at::Tensor q = Lin(w, p + "q_proj", x).view({b, sq, heads, hd}).transpose(1, 2);
    at::Tensor k = Lin(w, p + "k_proj", kv).view({b, sk, heads, hd}).transpose(1, 2);
    at::Tensor v = Lin(w, p + "v_proj", kv).view({b, sk, heads, hd}).transpose(1, 2);
    at::Tensor ctx = nn::Attention(q, k, v, blocked, 1.0 / std::sqrt(static_cast<double>(hd)));
    return Lin(w, p + "out_proj", ctx.transpose(1, 2).reshape({b, sq, d}));
  }
  at::Tensor Ffn(const WeightMap& w, const std::string& lp, const at::Tensor& x) const {
    return Lin(w, lp + "fc2", nn::Activate(Lin(w, lp + "fc1", x), c_.act));
  }
  // BartForCausalLM / MBartForCausalLM: the decoder stack, causal and padding-masked, no
  // cross-attention; logits from the (tied) embed_tokens.
  at::Tensor CausalForward(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask) const {
    const at::Tensor& embed = GetWeight(w, "model.decoder.embed_tokens.weight");
    at::Tensor causal = nn::BlockedKeys(mask, ids.size(1), true, std::nullopt, ids.device());
    at::Tensor y = Embed(w, "model.decoder.", embed, ids);
    for (int64_t i = 0; i < c_.dec_layers; ++i) {
      const std::string lp = "model.decoder.layers." + std::to_string(i) + ".";
      y = Residual(w, lp + "self_attn_layer_norm", y, [&](const at::Tensor& z) {
        return Attend(w, lp + "self_attn.", z, z, c_.dec_heads, causal);
      });
      y = Residual(w, lp + "final_layer_norm", y, [&](const at::Tensor& z) { return Ffn(w, lp, z); });
    }
    if (c_.pre_ln) y = Ln(w, "model.decoder.layer_norm", y);
    return nn::Linear(y, c_.tie ? embed : GetWeight(w, "lm_head.weight"));
  }
  // bart: [start, x[:, :-1]]; mbart: the row's last non-pad token (language id / eos) wraps to the
  // front (HF mbart shift_tokens_right).
  at::Tensor Shift(const at::Tensor& x) const {
    at::Tensor first = at::full({x.size(0), 1}, c_.start, x.options());
    if (c_.pre_ln) first = x.gather(1, (x.ne(c_.pad).sum(-1, true) - 1));
    at::Tensor out = at::cat({first, x.narrow(1, 0, x.size(1) - 1)}, 1);
    return out.masked_fill(out.eq(-100), c_.pad);
  }

  BartCfg c_;
  BartHead head_;
  Shapes shapes_;
  std::string pre_;
  int64_t seq_len_ = 32;
};

}  // namespace
}  // namespace ts::zoo::internal

namespace ts::zoo::internal {
namespace {

json T5SmallExample() {  // t5-small
  return json{{"model_type", "t5"}, {"d_ff", 2048}, {"d_kv", 64}, {"d_model", 512},
              {"decoder_start_token_id", 0}, {"dropout_rate", 0.1}, {"eos_token_id", 1},
              {"feed_forward_proj", "relu"}, {"initializer_factor", 1.0},
              {"is_encoder_decoder", true}, {"layer_norm_epsilon", 1e-06}, {"n_positions", 512},
              {"num_heads", 8}, {"num_layers", 6}, {"pad_token_id", 0},
              {"relative_attention_num_buckets", 32}, {"vocab_size", 32128}};
}

json T5V11Example() {  // google/t5-v1_1-base
  return json{{"model_type", "t5"}, {"d_ff", 2048}, {"d_kv", 64}, {"d_model", 768},
              {"decoder_start_token_id", 0}, {"dropout_rate", 0.1}, {"eos_token_id", 1},
              {"feed_forward_proj", "gated-gelu"}, {"initializer_factor", 1.0},
              {"is_encoder_decoder", true}, {"layer_norm_epsilon", 1e-06}, {"num_heads", 12},
              {"num_layers", 12}, {"pad_token_id", 0}, {"relative_attention_num_buckets", 32},
              {"tie_word_embeddings", false}, {"vocab_size", 32128}};
}

json Mt5Example() {  // google/mt5-small
  return json{{"model_type", "mt5"}, {"d_ff", 1024}, {"d_kv", 64}, {"d_model", 512},
              {"decoder_start_token_id", 0}, {"dropout_rate", 0.1}, {"eos_token_id", 1},
              {"feed_forward_proj", "gated-gelu"}, {"initializer_factor", 1.0},
              {"is_encoder_decoder", true}, {"layer_norm_epsilon", 1e-06}, {"num_decoder_layers", 8},
              {"num_heads", 6}, {"num_layers", 8}, {"pad_token_id", 0},
              {"relative_attention_num_buckets", 32}, {"tie_word_embeddings", false},
              {"tokenizer_class", "T5Tokenizer"}, {"vocab_size", 250112}};
}

ArchEntry T5Entry(const std::string& arch, const std::string& family, S2SHead head, json example) {
  ArchEntry e;
  e.info = {arch, family,
            head == S2SHead::kConditionalGeneration ? "text2text-generation"
            : head == S2SHead::kTokenClassification ? "token-classification"
                                                    : "feature-extraction"};
  example["architectures"] = {arch};
  if (head == S2SHead::kTokenClassification) example["num_labels"] = 2;
  e.example_config = std::move(example);
  e.scale = [](const json& c) { return ScaleT5(c); };
  e.build = [head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(T5Cfg c, ParseT5(spec.tiny_config));
    return std::unique_ptr<Model>(std::make_unique<T5Impl>(std::move(spec), c, head));
  };
  return e;
}


json BartBaseExample() {  // facebook/bart-base
  return json{{"model_type", "bart"}, {"activation_function", "gelu"}, {"add_bias_logits", false},
              {"add_final_layer_norm", false}, {"bos_token_id", 0}, {"d_model", 768},
              {"decoder_attention_heads", 12}, {"decoder_ffn_dim", 3072}, {"decoder_layers", 6},
              {"decoder_start_token_id", 2}, {"encoder_attention_heads", 12},
              {"encoder_ffn_dim", 3072}, {"encoder_layers", 6}, {"eos_token_id", 2},
              {"forced_bos_token_id", 0}, {"forced_eos_token_id", 2},
              {"id2label", json::object({{"0", "LABEL_0"}, {"1", "LABEL_1"}, {"2", "LABEL_2"}})},
              {"init_std", 0.02}, {"is_encoder_decoder", true}, {"max_position_embeddings", 1024},
              {"normalize_before", false}, {"num_hidden_layers", 6}, {"pad_token_id", 1},
              {"scale_embedding", false}, {"vocab_size", 50265}};
}

json MBartExample() {  // facebook/mbart-large-cc25
  return json{{"model_type", "mbart"}, {"activation_function", "gelu"}, {"add_bias_logits", false},
              {"add_final_layer_norm", true}, {"bos_token_id", 0}, {"d_model", 1024},
              {"decoder_attention_heads", 16}, {"decoder_ffn_dim", 4096}, {"decoder_layers", 12},
              {"encoder_attention_heads", 16}, {"encoder_ffn_dim", 4096}, {"encoder_layers", 12},
              {"eos_token_id", 2}, {"init_std", 0.02}, {"is_encoder_decoder", true},
              {"max_position_embeddings", 1024}, {"normalize_before", true},
              {"normalize_embedding", true}, {"num_hidden_layers", 12}, {"pad_token_id", 1},
              {"scale_embedding", true}, {"vocab_size", 250027}};
}

ArchEntry BartEntry(const std::string& arch, const std::string& family, BartHead head, json example) {
  ArchEntry e;
  const char* task = "feature-extraction";
  if (head == BartHead::kConditionalGeneration) task = "text2text-generation";
  if (head == BartHead::kSequenceClassification) task = "text-classification";
  if (head == BartHead::kQuestionAnswering) task = "question-answering";
  if (head == BartHead::kCausalLM) task = "text-generation";
  e.info = {arch, family, task};
  example["architectures"] = {arch};
  if (head == BartHead::kCausalLM) {  // a decoder-only checkpoint of the family
    example["is_decoder"] = true;
    example["is_encoder_decoder"] = false;
  }
  e.example_config = std::move(example);
  const bool mbart = family == "mbart";
  e.scale = [mbart](const json& c) { return ScaleBart(c, mbart); };
  e.build = [head, mbart](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(BartCfg c, ParseBart(spec.tiny_config, mbart));
    return std::unique_ptr<Model>(std::make_unique<BartImpl>(std::move(spec), c, head));
  };
  return e;
}

}  // namespace

std::vector<ArchEntry> Seq2SeqArchs() {
  std::vector<ArchEntry> v;
  v.push_back(T5Entry("T5ForConditionalGeneration", "t5", S2SHead::kConditionalGeneration, T5SmallExample()));
  v.push_back(T5Entry("T5Model", "t5", S2SHead::kModel, T5V11Example()));
  v.push_back(T5Entry("T5EncoderModel", "t5", S2SHead::kEncoderModel, T5V11Example()));
  v.push_back(T5Entry("T5ForTokenClassification", "t5", S2SHead::kTokenClassification, T5V11Example()));
  v.push_back(T5Entry("MT5ForTokenClassification", "mt5", S2SHead::kTokenClassification, Mt5Example()));
  v.push_back(T5Entry("MT5ForConditionalGeneration", "mt5", S2SHead::kConditionalGeneration, Mt5Example()));
  v.push_back(T5Entry("MT5Model", "mt5", S2SHead::kModel, Mt5Example()));
  v.push_back(T5Entry("MT5EncoderModel", "mt5", S2SHead::kEncoderModel, Mt5Example()));
  v.push_back(BartEntry("BartForConditionalGeneration", "bart", BartHead::kConditionalGeneration, BartBaseExample()));
  v.push_back(BartEntry("BartModel", "bart", BartHead::kModel, BartBaseExample()));
  v.push_back(BartEntry("BartForSequenceClassification", "bart", BartHead::kSequenceClassification, BartBaseExample()));
  v.push_back(BartEntry("BartForQuestionAnswering", "bart", BartHead::kQuestionAnswering, BartBaseExample()));
  v.push_back(BartEntry("BartForCausalLM", "bart", BartHead::kCausalLM, BartBaseExample()));
  v.push_back(BartEntry("MBartForCausalLM", "mbart", BartHead::kCausalLM, MBartExample()));
  v.push_back(BartEntry("MBartForConditionalGeneration", "mbart", BartHead::kConditionalGeneration, MBartExample()));
  v.push_back(BartEntry("MBartModel", "mbart", BartHead::kModel, MBartExample()));
  v.push_back(BartEntry("MBartForSequenceClassification", "mbart", BartHead::kSequenceClassification, MBartExample()));
  v.push_back(BartEntry("MBartForQuestionAnswering", "mbart", BartHead::kQuestionAnswering, MBartExample()));
  return v;
}

}  // namespace ts::zoo::internal
