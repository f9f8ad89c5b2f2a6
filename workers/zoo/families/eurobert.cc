// eurobert: EuroBERT (modeling_eurobert.py, transformers 5) as a family stack on the encoder
// trunk (encoder.h Stack): Llama's layers without the causal mask. model.embed_tokens, layers of
// input_layernorm (RMSNorm) -> self_attn (q / k / v / o_proj, grouped key / value heads, the
// default rotary over arange(S) at rope_theta, scaled by head_dim^-0.5) -> residual ->
// post_attention_layernorm -> mlp (down_proj(act(gate_proj(x)) * up_proj(x))) -> residual, then
// model.norm. Heads: EuroBertForMaskedLM's lm_head (bias with mlp_bias; its own weight unless
// tie_word_embeddings), EuroBertForSequenceClassification's dense -> GELU -> classifier with
// classifier_pooling "bos" (token 0), "mean" (the attended tokens' mean) or "late" (the
// classifier's logits averaged over the attended tokens: computed as the classifier over the
// average of GELU(dense(h)), the same affine map, so the head needs no per-token logits), and
// EuroBertForTokenClassification's classifier. A rope type other than default is refused naming
// the field. EuroBERT/EuroBERT-210m.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal::encoder {
namespace {

enum class EuroPooling { kBos, kMean, kLate };

struct EuroBertShape {
  int64_t kv_heads = 0, head_dim = 0;
  double theta = 250000.0;
  bool attn_bias = false, mlp_bias = false;
  EuroPooling pooling = EuroPooling::kLate;
};

struct EuroBertLayerW {
  std::string in_norm, q, k, v, o, post_norm, gate, up, down;
};

class EuroBertStack : public Stack {
 public:
  EuroBertStack(const Recipe& r, EuroBertShape shape) : r_(r), m_(shape) {}

  void AddWeights(const std::string& p, const AddFn& add) override {
    const int64_t h = r_.hidden, hd = m_.head_dim;
    word_ = add(p + "embed_tokens.weight", {r_.vocab, h});
    for (int64_t i = 0; i < r_.layers; ++i) {
      const std::string lp = p + "layers." + std::to_string(i) + ".";
      EuroBertLayerW l;
      // EuroBertDecoderLayer.__init__: self_attn, mlp, input_layernorm, post_attention_layernorm.
      l.q = Linear(add, lp + "self_attn.q_proj", r_.heads * hd, h, m_.attn_bias);
      l.k = Linear(add, lp + "self_attn.k_proj", m_.kv_heads * hd, h, m_.attn_bias);
      l.v = Linear(add, lp + "self_attn.v_proj", m_.kv_heads * hd, h, m_.attn_bias);
      l.o = Linear(add, lp + "self_attn.o_proj", h, r_.heads * hd, m_.attn_bias);
      l.gate = Linear(add, lp + "mlp.gate_proj", r_.inter, h, m_.mlp_bias);
      l.up = Linear(add, lp + "mlp.up_proj", r_.inter, h, m_.mlp_bias);
      l.down = Linear(add, lp + "mlp.down_proj", h, r_.inter, m_.mlp_bias);
      l.in_norm = add(lp + "input_layernorm.weight", {h});
      l.post_norm = add(lp + "post_attention_layernorm.weight", {h});
      layers_.push_back(std::move(l));
    }
    norm_ = add(p + "norm.weight", {h});
  }

  void AddHeadWeights(bool sequence_level, bool, const AddFn& add) override {
    if (!sequence_level) return;
    dense_ = Linear(add, "dense", r_.hidden, r_.hidden, true);
  }

  std::string WordEmbedding() const override { return word_; }

  at::Tensor Encode(const WeightMap& w, const at::Tensor& ids, const at::Tensor&, const at::Tensor&,
                    const at::Tensor& blocked) const override {
    at::Tensor x = nn::Embedding(GetWeight(w, word_), ids, r_.pad.value_or(-1));
    RopeConfig rope;
    rope.theta = m_.theta;
    const auto cs = nn::RotaryCosSin(rope, m_.head_dim, at::arange(ids.size(1), ids.options()),
                                     x.scalar_type());
    for (const EuroBertLayerW& l : layers_) x = Layer(w, l, x, blocked, cs);
    return nn::RmsNorm(x, GetWeight(w, norm_), r_.eps);
  }

  // The sequence head's dense + GELU over the pooled row (bos, mean) or every attended token,
  // averaged ("late": the classifier after it is affine, so averaging its input averages its
  // logits).
  at::Tensor HeadInput(const WeightMap& w, bool sequence_level, bool, const at::Tensor&,
                       const TensorMap&, const at::Tensor& h,
                       const at::Tensor& mask) const override {
    if (!sequence_level) return h;
    auto dense = [&](const at::Tensor& t) {
      return at::gelu(
          nn::Linear(t, GetWeight(w, dense_ + ".weight"), GetWeight(w, dense_ + ".bias")));
    };
    auto mean = [&](const at::Tensor& t) {
      if (!mask.defined()) return t.mean(1, /*keepdim=*/true);
      const at::Tensor m = mask.to(t.scalar_type()).unsqueeze(-1);
      return (t * m).sum(1, /*keepdim=*/true) / m.sum(1, /*keepdim=*/true);
    };
    switch (m_.pooling) {
      case EuroPooling::kBos:
        return dense(h.narrow(1, 0, 1));
      case EuroPooling::kMean:
        return dense(mean(h));
      case EuroPooling::kLate:
        break;
    }
    return mean(dense(h));
  }

 private:
  static std::string Linear(const AddFn& add, const std::string& n, int64_t out, int64_t in,
                            bool bias) {
    add(n + ".weight", {out, in});
    if (bias) add(n + ".bias", {out});
    return n;
  }
  at::Tensor Lin(const WeightMap& w, const at::Tensor& x, const std::string& n, bool bias) const {
    return nn::Linear(x, GetWeight(w, n + ".weight"),
                      GetOptionalWeight(w, bias ? n + ".bias" : ""));
  }

  at::Tensor Layer(const WeightMap& w, const EuroBertLayerW& l, const at::Tensor& x,
                   const at::Tensor& blocked, const std::pair<at::Tensor, at::Tensor>& cs) const {
    const int64_t n = x.size(0), s = x.size(1), hd = m_.head_dim;
    auto heads = [&](const at::Tensor& t, int64_t count) {
      return t.view({n, s, count, hd}).transpose(1, 2);
    };
    const at::Tensor a = nn::RmsNorm(x, GetWeight(w, l.in_norm), r_.eps);
    const at::Tensor q =
        nn::ApplyRotary(heads(Lin(w, a, l.q, m_.attn_bias), r_.heads), cs.first, cs.second);
    const at::Tensor k =
        nn::ApplyRotary(heads(Lin(w, a, l.k, m_.attn_bias), m_.kv_heads), cs.first, cs.second);
    const at::Tensor v = heads(Lin(w, a, l.v, m_.attn_bias), m_.kv_heads);
    const at::Tensor ctx =
        nn::Attention(q, k, v, blocked, 1.0 / std::sqrt(static_cast<double>(hd)));
    const at::Tensor y =
        x + Lin(w, ctx.transpose(1, 2).reshape({n, s, r_.heads * hd}), l.o, m_.attn_bias);
    const at::Tensor f = nn::RmsNorm(y, GetWeight(w, l.post_norm), r_.eps);
    const at::Tensor g = nn::Activate(Lin(w, f, l.gate, m_.mlp_bias), r_.act);
    return y + Lin(w, g * Lin(w, f, l.up, m_.mlp_bias), l.down, m_.mlp_bias);
  }

  Recipe r_;
  EuroBertShape m_;
  std::string word_, norm_, dense_;
  std::vector<EuroBertLayerW> layers_;
};

// rope_parameters (transformers 5) or the flat rope_theta / rope_scaling: the default rope only.
Status ParseEuroBertRope(const ConfigReader& r, const json& config, EuroBertShape& m) {
  const json* params = nullptr;
  std::string field = "rope_parameters";
  if (config.contains("rope_scaling") && config["rope_scaling"].is_object() &&
      !config["rope_scaling"].empty()) {
    params = &config["rope_scaling"];
    field = "rope_scaling";
  } else if (config.contains("rope_parameters") && config["rope_parameters"].is_object()) {
    params = &config["rope_parameters"];
  }
  TS_ASSIGN_OR_RETURN(m.theta, r.Double("rope_theta", 250000.0));
  if (params == nullptr) return OkStatus();
  for (const char* key : {"rope_type", "type"}) {
    if (params->contains(key)) {
      const json& t = (*params)[key];
      if (!t.is_string() || t.get<std::string>() != "default")
        return r.Error(field + "." + key,
                       "only the default rope is supported (got " + t.dump() + ")");
    }
  }
  if (params->contains("rope_theta")) {
    if (!(*params)["rope_theta"].is_number())
      return r.Error(field + ".rope_theta", "expected a number");
    m.theta = (*params)["rope_theta"].get<double>();
  }
  return OkStatus();
}

Status ParseEuroBert(const ConfigReader& r, const json& config, Recipe& c) {
  EuroBertShape m;
  TS_ASSIGN_OR_RETURN(m.kv_heads, r.Int("num_key_value_heads", c.heads));
  TS_RETURN_IF_ERROR(Positive(r, "num_key_value_heads", m.kv_heads));
  if (c.heads % m.kv_heads != 0)
    return r.Error("num_key_value_heads", "must divide num_attention_heads");
  m.head_dim = c.hidden / c.heads;
  if (r.Has("head_dim") && !r.IsNull("head_dim")) {
    TS_ASSIGN_OR_RETURN(m.head_dim, r.Int("head_dim"));
    TS_RETURN_IF_ERROR(Positive(r, "head_dim", m.head_dim));
  }
  if (m.head_dim % 2 != 0) return r.Error("head_dim", "must be even (rotary)");
  TS_RETURN_IF_ERROR(ParseEuroBertRope(r, config, m));
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("rms_norm_eps", 1e-5));
  if (!(c.eps > 0.0)) return r.Error("rms_norm_eps", "must be positive");
  TS_ASSIGN_OR_RETURN(m.attn_bias, r.Bool("attention_bias", false));
  TS_ASSIGN_OR_RETURN(m.mlp_bias, r.Bool("mlp_bias", false));
  // EuroBertConfig stores its classifier_pooling argument; older checkpoints name it clf_pooling.
  const std::string pooling_field =
      !r.Has("classifier_pooling") && r.Has("clf_pooling") ? "clf_pooling" : "classifier_pooling";
  TS_ASSIGN_OR_RETURN(std::string pooling, r.String(pooling_field, "late"));
  if (pooling == "bos") {
    m.pooling = EuroPooling::kBos;
  } else if (pooling == "mean") {
    m.pooling = EuroPooling::kMean;
  } else if (pooling != "late") {
    return r.Error(pooling_field, "must be bos, mean or late (got '" + pooling + "')");
  }
  TS_ASSIGN_OR_RETURN(bool tied, r.Bool("tie_word_embeddings", false));
  c.lm_untied = !tied;
  c.lm_bias = m.mlp_bias;
  c.stack = [m](const Recipe& rec) { return std::make_unique<EuroBertStack>(rec, m); };
  return OkStatus();
}

// Grouped heads kept in ratio as the decoders' tiny policy keeps them, head_dim from the width.
void ScaleEuroBert(const Recipe& real, json& t) {
  const int64_t heads = t["num_attention_heads"].get<int64_t>();
  const int64_t real_kv = t.value("num_key_value_heads", real.heads);
  const int64_t ratio = std::max<int64_t>(1, real.heads / std::max<int64_t>(real_kv, 1));
  t["num_key_value_heads"] = std::max<int64_t>(1, heads / ratio);
  if (t.contains("head_dim")) t.erase("head_dim");
}

// EuroBertForMaskedLM's lm_head.weight is embed_tokens when tie_word_embeddings.
void EuroBertStateDictExtra(StateDictBuilder& sd) {
  if (!sd.HasWeight("lm_head.weight") && sd.model().spec().arch == "EuroBertForMaskedLM")
    sd.AddTied("lm_head.weight", "model.embed_tokens.weight");
}

}  // namespace

EncoderFamily EuroBert() {
  const json example = {{"model_type", "eurobert"},     {"hidden_size", 768},
                        {"intermediate_size", 3072},    {"num_hidden_layers", 12},
                        {"num_attention_heads", 12},    {"num_key_value_heads", 12},
                        {"hidden_act", "silu"},         {"max_position_embeddings", 8192},
                        {"vocab_size", 128256},         {"rms_norm_eps", 1e-5},
                        {"bos_token_id", 128000},       {"eos_token_id", 128001},
                        {"pad_token_id", 128001},       {"mask_token_id", 128002},
                        {"tie_word_embeddings", false}, {"rope_theta", 250000.0},
                        {"attention_bias", false},      {"mlp_bias", false},
                        {"classifier_pooling", "late"}};
  return {
      .model_type = "eurobert",
      .defaults = {.type_vocab = -1, .act = "silu", .pad = 128001},
      .structure = {.base = "model."},
      .names = {.seq_pooled = false, .seq_out = "classifier", .lm_bias = "lm_head"},
      .parse = ParseEuroBert,
      .scale_extra = ScaleEuroBert,
      .classes = {.base = "EuroBertModel",
                  .seq_cls = "EuroBertForSequenceClassification",
                  .token_cls = "EuroBertForTokenClassification",
                  .masked_lm = "EuroBertForMaskedLM"},
      .example = example,
      .state_dict = {.extra = EuroBertStateDictExtra},
  };
}

TS_ZOO_ENCODER_FAMILY(EuroBert);

}  // namespace ts::zoo::internal::encoder
