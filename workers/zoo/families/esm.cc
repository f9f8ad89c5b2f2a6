// esm: ESM-1b / ESM-2 (modeling_esm.py) as a family stack on the encoder trunk (encoder.h
// Stack): word embeddings with token dropout (`token_dropout`: the mask_token_id rows zeroed and
// every row scaled by (1 - 0.15 * 0.8) / (1 - its share of mask tokens), in eval as in training:
// it is arithmetic, not dropout), learned positions after the pad id ("absolute", with
// `embeddings.layer_norm` when emb_layer_norm_before) or the rotary over arange(S) ("rotary",
// inv_freq 10000^(-2i/d), the query scaled by d^-0.5 before it); pre-LN layers
// (attention.LayerNorm before the attention, the layer's LayerNorm before the FFN, ESM's erf GELU
// whatever hidden_act says) and encoder.emb_layer_norm_after. Heads: EsmModel's tanh pooler,
// EsmClassificationHead (classifier.dense, tanh, out_proj over token 0), the token classifier,
// EsmLMHead (dense, GELU, layer_norm, the decoder tied to the word embeddings, no decoder bias, its
// own `bias`). The state_dict adds each rotary layer's persistent `inv_freq` buffer and the base
// model's unused contact_head.regression. The batches hold no mask token, so the token-dropout
// scale is the same whether transformers counts a row's length with its attention mask (older
// releases) or without (current). Refused naming the field: position_embedding_type
// relative_key / relative_key_query, is_folding_model, and tie_word_embeddings false for
// EsmForMaskedLM (an untied decoder). facebook/esm2_t6_8M_UR50D.
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal::encoder {
namespace {

struct EsmShape {
  bool rotary = true, norm_before = false, token_dropout = false;
  int64_t mask_id = -1;
};

struct EsmLayerW {
  std::string q, k, v, o, attn_norm, inter, out, ffn_norm;
};

class EsmStack : public Stack {
 public:
  EsmStack(const Recipe& r, EsmShape shape) : r_(r), m_(shape) {}

  void AddWeights(const std::string& p, const AddFn& add) override {
    const int64_t h = r_.hidden;
    auto linear = [&](const std::string& n, int64_t out, int64_t in) {
      add(n + ".weight", {out, in});
      add(n + ".bias", {out});
      return n;
    };
    auto norm = [&](const std::string& n) {
      add(n + ".weight", {h});
      add(n + ".bias", {h});
      return n;
    };
    // EsmEmbeddings.__init__: word_embeddings, layer_norm, position_embeddings.
    word_ = add(p + "embeddings.word_embeddings.weight", {r_.vocab, h});
    if (m_.norm_before) emb_norm_ = norm(p + "embeddings.layer_norm");
    if (!m_.rotary) pos_ = add(p + "embeddings.position_embeddings.weight", {r_.max_pos, h});
    for (int64_t i = 0; i < r_.layers; ++i) {
      const std::string lp = p + "encoder.layer." + std::to_string(i) + ".";
      EsmLayerW l;
      l.q = linear(lp + "attention.self.query", h, h);
      l.k = linear(lp + "attention.self.key", h, h);
      l.v = linear(lp + "attention.self.value", h, h);
      l.o = linear(lp + "attention.output.dense", h, h);
      l.attn_norm = norm(lp + "attention.LayerNorm");
      l.inter = linear(lp + "intermediate.dense", r_.inter, h);
      l.out = linear(lp + "output.dense", h, r_.inter);
      l.ffn_norm = norm(lp + "LayerNorm");
      layers_.push_back(std::move(l));
    }
    final_norm_ = norm(p + "encoder.emb_layer_norm_after");
  }

  std::string WordEmbedding() const override { return word_; }

  void InitWeight(const std::string& name, at::Tensor& t) const override {
    // position_embeddings has padding_idx pad_token_id.
    if (name == pos_ && r_.pad) t[*r_.pad].zero_();
  }

  at::Tensor Encode(const WeightMap& w, const at::Tensor& ids, const at::Tensor&, const at::Tensor&,
                    const at::Tensor& blocked) const override {
    at::Tensor x = Embed(w, ids);
    at::Tensor cos, sin;
    if (m_.rotary) {
      const int64_t hd = r_.hidden / r_.heads;
      std::tie(cos, sin) = nn::RotaryCosSin(
          RopeConfig{}, hd, at::arange(ids.size(1), ids.options()), x.scalar_type());
    }
    for (const EsmLayerW& l : layers_) x = Layer(w, l, x, blocked, cos, sin);
    return Ln(w, x, final_norm_);
  }

 private:
  at::Tensor Ln(const WeightMap& w, const at::Tensor& x, const std::string& n) const {
    return nn::LayerNorm(x, GetWeight(w, n + ".weight"), GetWeight(w, n + ".bias"), r_.eps);
  }
  at::Tensor Lin(const WeightMap& w, const at::Tensor& x, const std::string& n) const {
    return nn::Linear(x, GetWeight(w, n + ".weight"), GetWeight(w, n + ".bias"));
  }

  at::Tensor Embed(const WeightMap& w, const at::Tensor& ids) const {
    const int64_t pad = r_.pad.value_or(-1);
    at::Tensor x = nn::Embedding(GetWeight(w, word_), ids, pad);
    if (m_.token_dropout) {
      // mask_ratio_observed over the row's length (input_ids.shape[1]).
      const at::Tensor masked = ids.eq(m_.mask_id);
      x = x.masked_fill(masked.unsqueeze(-1), 0.0);
      const at::Tensor observed =
          masked.sum(-1).to(x.scalar_type()) / static_cast<double>(ids.size(1));
      x = x * (1.0 - 0.15 * 0.8) / (1.0 - observed).view({-1, 1, 1});
    }
    if (!m_.rotary) {  // create_position_ids_from_input_ids
      const at::Tensor keep = ids.ne(pad).to(at::kLong);
      x = x + nn::Embedding(GetWeight(w, pos_), at::cumsum(keep, 1) * keep + pad, pad);
    }
    if (m_.norm_before) x = Ln(w, x, emb_norm_);
    return x;
  }

  at::Tensor Layer(const WeightMap& w, const EsmLayerW& l, const at::Tensor& x,
                   const at::Tensor& blocked, const at::Tensor& cos, const at::Tensor& sin) const {
    const int64_t n = x.size(0), s = x.size(1), nh = r_.heads, hd = r_.hidden / nh;
    auto heads = [&](const at::Tensor& t) { return t.view({n, s, nh, hd}).transpose(1, 2); };
    const at::Tensor a_in = Ln(w, x, l.attn_norm);
    // EsmSelfAttention: the query scaled before the rotary, the scores then unscaled.
    at::Tensor q = heads(Lin(w, a_in, l.q)) * std::pow(static_cast<double>(hd), -0.5);
    at::Tensor k = heads(Lin(w, a_in, l.k));
    if (m_.rotary) {
      q = nn::ApplyRotary(q, cos, sin);
      k = nn::ApplyRotary(k, cos, sin);
    }
    at::Tensor ctx = nn::Attention(q, k, heads(Lin(w, a_in, l.v)), blocked, 1.0);
    const at::Tensor y = Lin(w, ctx.transpose(1, 2).reshape({n, s, r_.hidden}), l.o) + x;
    const at::Tensor f = nn::Activate(Lin(w, Ln(w, y, l.ffn_norm), l.inter), Activation::kGeluErf);
    return Lin(w, f, l.out) + y;
  }

  Recipe r_;
  EsmShape m_;
  std::string word_, pos_, emb_norm_, final_norm_;
  std::vector<EsmLayerW> layers_;
};

Status ParseEsm(const ConfigReader& r, const json&, Recipe& c) {
  EsmShape m;
  TS_ASSIGN_OR_RETURN(std::string pt, r.String("position_embedding_type", "absolute"));
  if (pt != "absolute" && pt != "rotary")
    return r.Error("position_embedding_type", "unsupported '" + pt + "' (absolute, rotary)");
  m.rotary = pt == "rotary";
  TS_ASSIGN_OR_RETURN(bool folding, r.Bool("is_folding_model", false));
  if (folding) return r.Error("is_folding_model", "ESMFold is not supported");
  if (!r.IsNull("emb_layer_norm_before")) {
    TS_ASSIGN_OR_RETURN(m.norm_before, r.Bool("emb_layer_norm_before", false));
  }
  TS_ASSIGN_OR_RETURN(m.token_dropout, r.Bool("token_dropout", false));
  if (r.Has("mask_token_id") && !r.IsNull("mask_token_id")) {
    TS_ASSIGN_OR_RETURN(m.mask_id, r.Int("mask_token_id"));
  }
  if (m.token_dropout && m.mask_id >= 0 && m.mask_id < c.vocab) c.avoid_id = m.mask_id;
  if (!m.rotary) {
    if (!c.pad) return r.Error("pad_token_id", "required (absolute position ids)");
    c.positions = Positions::kAfterPad;
  }
  c.act = Activation::kGeluErf;  // EsmIntermediate's own gelu
  TS_ASSIGN_OR_RETURN(bool tied, r.Bool("tie_word_embeddings", true));
  if (!tied)
    c.lm_error = r.Name("tie_word_embeddings") + ": false is not supported (untied decoder)";
  c.stack = [m](const Recipe& rec) { return std::make_unique<EsmStack>(rec, m); };
  return OkStatus();
}

// transformers' state_dict beyond the weights: each rotary layer's inv_freq buffer, the base
// model's contact_head.regression (built, never called by these classes).
void EsmStateDictExtra(StateDictBuilder& sd) {
  const json& cfg = sd.model().spec().tiny_config;
  const int64_t heads = cfg.value("num_attention_heads", int64_t{1});
  const int64_t layers = cfg.value("num_hidden_layers", int64_t{1});
  const bool rotary = cfg.value("position_embedding_type", std::string("absolute")) == "rotary";
  std::string base;
  for (const auto& [n, s] : sd.weights()) {
    const std::string key = "encoder.layer.0.attention.self.query.weight";
    if (n.size() >= key.size() && n.compare(n.size() - key.size(), key.size(), key) == 0) {
      base = n.substr(0, n.size() - key.size());
      const int64_t hd = s[0] / heads;
      std::vector<double> inv;
      for (int64_t i = 0; i < hd; i += 2)  // 1 / 10000^(arange(0, d, 2).float() / d), float32
        inv.push_back(static_cast<float>(
            1.0 / std::pow(10000.0, static_cast<double>(static_cast<float>(i) / hd))));
      for (int64_t li = 0; rotary && li < layers; ++li) {
        sd.Add({base + "encoder.layer." + std::to_string(li) +
                    ".attention.self.rotary_embeddings.inv_freq",
                {hd / 2},
                at::kFloat,
                "",
                std::nullopt,
                inv});
      }
    }
  }
  sd.AddUnused(base + "contact_head.regression.weight", {1, layers * heads});
  sd.AddUnused(base + "contact_head.regression.bias", {1});
}

}  // namespace

EncoderFamily Esm() {
  const json example = {{"model_type", "esm"},
                        {"hidden_size", 320},
                        {"num_attention_heads", 20},
                        {"num_hidden_layers", 6},
                        {"intermediate_size", 1280},
                        {"vocab_size", 33},
                        {"max_position_embeddings", 1026},
                        {"hidden_act", "gelu"},
                        {"layer_norm_eps", 1e-5},
                        {"pad_token_id", 1},
                        {"mask_token_id", 32},
                        {"position_embedding_type", "rotary"},
                        {"emb_layer_norm_before", false},
                        {"token_dropout", true}};
  return {
      .model_type = "esm",
      .defaults = {.type_vocab = -1, .pad = -1},
      .structure = {.base = "esm."},
      .names = {.pooler = "pooler.dense",
                .seq_pooled = false,
                .seq_dense = "classifier.dense",
                .seq_out = "classifier.out_proj",
                .lm_dense = "lm_head.dense",
                .lm_norm = "lm_head.layer_norm",
                .lm_bias = "lm_head",
                .lm_hidden_act = false},
      .parse = ParseEsm,
      .classes = {.base = "EsmModel",
                  .seq_cls = "EsmForSequenceClassification",
                  .token_cls = "EsmForTokenClassification",
                  .masked_lm = "EsmForMaskedLM"},
      .example = example,
      .state_dict = {.decoder_bias = false, .extra = EsmStateDictExtra},
  };
}

TS_ZOO_ENCODER_FAMILY(Esm);

}  // namespace ts::zoo::internal::encoder
