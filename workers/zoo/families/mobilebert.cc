// mobilebert: MobileBERT (modeling_mobilebert.py) as a family stack on the encoder trunk
// (encoder.h Stack): narrow embeddings (embedding_size) with the trigram input (the token, its
// right and its left neighbour concatenated, then embedding_transformation to hidden_size),
// layers that work at true_hidden_size (intra_bottleneck_size with use_bottleneck): the
// bottleneck input (and the shared query / key bottleneck) from the hidden width, attention,
// num_feedforward_networks - 1 extra FFNs (ffn.j), the last FFN, then output.bottleneck back to
// hidden_size with the layer input as its residual. normalization_type "no_norm" is NoNorm
// (x * weight + bias), "layer_norm" nn.LayerNorm: with layer_norm_eps except the embeddings' and
// MobileBertOutput's, which transformers builds at LayerNorm's default 1e-5. Heads are BERT's
// (pooler.dense, cls.seq_relationship, qa_outputs, classifier); the LM decoder is the tied word
// embeddings [V, E] beside cls.predictions.dense [H - E, V] (HeadNames::lm_extra).
// classifier_activation false (a pooler without its dense layer), an embedding_size not below
// hidden_size for the LM classes (the extra rows would be none) and an unknown
// normalization_type are refused naming the field. google/mobilebert-uncased.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::encoder {
namespace {

struct MobileBertShape {
  int64_t true_hidden = 0, bottleneck = 0, ffns = 1;
  bool trigram = true, use_bottleneck = true, bottleneck_attention = false, kq_shared = true;
  bool no_norm = true;
};

// One layer's weight names.
struct MobileBertLayerW {
  std::string q, k, v, o, o_norm, inter, out, out_norm, down, down_norm, in, in_norm, kq, kq_norm;
  std::vector<std::array<std::string, 3>> ffn;  // intermediate, output.dense, output.LayerNorm
};

class MobileBertStack : public Stack {
 public:
  MobileBertStack(const Recipe& r, MobileBertShape shape) : r_(r), m_(shape) {}

  void AddWeights(const std::string& p, const AddFn& add) override {
    const int64_t h = r_.hidden, e = r_.embedding, t = m_.true_hidden;
    word_ = add(p + "embeddings.word_embeddings.weight", {r_.vocab, e});
    pos_ = add(p + "embeddings.position_embeddings.weight", {r_.max_pos, h});
    type_ = add(p + "embeddings.token_type_embeddings.weight", {r_.type_vocab, h});
    if (Transforms()) {
      const int64_t in = e * (m_.trigram ? 3 : 1);
      proj_ = add(p + "embeddings.embedding_transformation.weight", {h, in});
      proj_b_ = add(p + "embeddings.embedding_transformation.bias", {h});
    }
    emb_norm_ = p + "embeddings.LayerNorm";
    add(emb_norm_ + ".weight", {h});
    add(emb_norm_ + ".bias", {h});
    auto linear = [&](const std::string& n, int64_t out, int64_t in) {
      add(n + ".weight", {out, in});
      add(n + ".bias", {out});
      return n;
    };
    auto norm = [&](const std::string& n, int64_t width) {
      add(n + ".weight", {width});
      add(n + ".bias", {width});
      return n;
    };
    for (int64_t i = 0; i < r_.layers; ++i) {
      const std::string lp = p + "encoder.layer." + std::to_string(i) + ".";
      MobileBertLayerW l;
      l.q = linear(lp + "attention.self.query", t, t);
      l.k = linear(lp + "attention.self.key", t, t);
      l.v = linear(lp + "attention.self.value", t, m_.bottleneck_attention ? t : h);
      l.o = linear(lp + "attention.output.dense", t, t);
      l.o_norm = norm(lp + "attention.output.LayerNorm", t);
      l.inter = linear(lp + "intermediate.dense", r_.inter, t);
      l.out = linear(lp + "output.dense", t, r_.inter);
      l.out_norm = norm(lp + "output.LayerNorm", t);
      if (m_.use_bottleneck) {
        l.down = linear(lp + "output.bottleneck.dense", h, t);
        l.down_norm = norm(lp + "output.bottleneck.LayerNorm", h);
        l.in = linear(lp + "bottleneck.input.dense", m_.bottleneck, h);
        l.in_norm = norm(lp + "bottleneck.input.LayerNorm", m_.bottleneck);
        if (m_.kq_shared) {
          l.kq = linear(lp + "bottleneck.attention.dense", m_.bottleneck, h);
          l.kq_norm = norm(lp + "bottleneck.attention.LayerNorm", m_.bottleneck);
        }
      }
      for (int64_t j = 0; j + 1 < m_.ffns; ++j) {
        const std::string fp = lp + "ffn." + std::to_string(j) + ".";
        l.ffn.push_back({linear(fp + "intermediate.dense", r_.inter, t),
                         linear(fp + "output.dense", t, r_.inter),
                         norm(fp + "output.LayerNorm", t)});
      }
      layers_.push_back(std::move(l));
    }
  }

  std::string WordEmbedding() const override { return word_; }

  at::Tensor Encode(const WeightMap& w, const at::Tensor& ids, const at::Tensor&,
                    const at::Tensor& types, const at::Tensor& blocked) const override {
    at::Tensor x = Embed(w, ids, types);
    for (const MobileBertLayerW& l : layers_) x = Layer(w, l, x, blocked);
    return x;
  }

 private:
  bool Transforms() const { return m_.trigram || r_.embedding != r_.hidden; }

  // NoNorm (x * weight + bias) or nn.LayerNorm at `eps`.
  at::Tensor Norm(const WeightMap& w, const at::Tensor& x, const std::string& n, double eps) const {
    const at::Tensor& g = GetWeight(w, n + ".weight");
    const at::Tensor& b = GetWeight(w, n + ".bias");
    return m_.no_norm ? x * g + b : nn::LayerNorm(x, g, b, eps);
  }
  at::Tensor Lin(const WeightMap& w, const at::Tensor& x, const std::string& n) const {
    return nn::Linear(x, GetWeight(w, n + ".weight"), GetWeight(w, n + ".bias"));
  }

  at::Tensor Embed(const WeightMap& w, const at::Tensor& ids, const at::Tensor& types) const {
    at::Tensor x = nn::Embedding(GetWeight(w, word_), ids, r_.pad.value_or(-1));
    const int64_t s = ids.size(1);
    if (m_.trigram) {  // [token i + 1 | token i | token i - 1], zeros past either end
      const at::Tensor zero = at::zeros_like(x.narrow(1, 0, 1));
      const at::Tensor next = at::cat({x.narrow(1, 1, s - 1), zero}, 1);
      const at::Tensor prev = at::cat({zero, x.narrow(1, 0, s - 1)}, 1);
      x = at::cat({next, x, prev}, 2);
    }
    if (Transforms()) x = nn::Linear(x, GetWeight(w, proj_), GetWeight(w, proj_b_));
    const at::Tensor pos = at::arange(s, ids.options());
    const at::Tensor ty = types.defined() ? types : at::zeros_like(ids);
    x = x + nn::Embedding(GetWeight(w, pos_), pos) + nn::Embedding(GetWeight(w, type_), ty);
    return Norm(w, x, emb_norm_, 1e-5);  // NORM2FN[...](hidden_size): LayerNorm's default eps
  }

  at::Tensor Layer(const WeightMap& w, const MobileBertLayerW& l, const at::Tensor& h,
                   const at::Tensor& blocked) const {
    at::Tensor q = h, k = h, v = h, input = h;
    if (m_.use_bottleneck) {  // Bottleneck.forward
      input = Norm(w, Lin(w, h, l.in), l.in_norm, r_.eps);
      if (m_.bottleneck_attention) {
        q = k = v = input;
      } else if (m_.kq_shared) {
        q = k = Norm(w, Lin(w, h, l.kq), l.kq_norm, r_.eps);
      }
    }
    const int64_t n = h.size(0), s = h.size(1), nh = r_.heads, hd = m_.true_hidden / nh;
    auto heads = [&](const at::Tensor& t) { return t.view({n, s, nh, hd}).transpose(1, 2); };
    at::Tensor ctx =
        nn::Attention(heads(Lin(w, q, l.q)), heads(Lin(w, k, l.k)), heads(Lin(w, v, l.v)), blocked,
                      1.0 / std::sqrt(static_cast<double>(hd)));
    ctx = ctx.transpose(1, 2).reshape({n, s, m_.true_hidden});
    at::Tensor a = Norm(w, Lin(w, ctx, l.o) + input, l.o_norm, r_.eps);
    for (const auto& f : l.ffn) {  // FFNLayer: FFNOutput's LayerNorm(dense(act(...)) + a)
      a = Norm(w, Lin(w, nn::Activate(Lin(w, a, f[0]), r_.act), f[1]) + a, f[2], r_.eps);
    }
    at::Tensor out = Lin(w, nn::Activate(Lin(w, a, l.inter), r_.act), l.out) + a;
    out = Norm(w, out, l.out_norm, 1e-5);  // MobileBertOutput.LayerNorm: the default eps
    if (m_.use_bottleneck) out = Norm(w, Lin(w, out, l.down) + h, l.down_norm, r_.eps);
    return out;
  }

  Recipe r_;
  MobileBertShape m_;
  std::string word_, pos_, type_, proj_, proj_b_, emb_norm_;
  std::vector<MobileBertLayerW> layers_;
};

Status ParseMobileBert(const ConfigReader& r, const json&, Recipe& c) {
  MobileBertShape m;
  TS_ASSIGN_OR_RETURN(m.trigram, r.Bool("trigram_input", true));
  TS_ASSIGN_OR_RETURN(m.use_bottleneck, r.Bool("use_bottleneck", true));
  TS_ASSIGN_OR_RETURN(m.bottleneck, r.Int("intra_bottleneck_size", 128));
  TS_RETURN_IF_ERROR(Positive(r, "intra_bottleneck_size", m.bottleneck));
  TS_ASSIGN_OR_RETURN(m.bottleneck_attention, r.Bool("use_bottleneck_attention", false));
  TS_ASSIGN_OR_RETURN(m.kq_shared, r.Bool("key_query_shared_bottleneck", true));
  TS_ASSIGN_OR_RETURN(m.ffns, r.Int("num_feedforward_networks", 4));
  TS_RETURN_IF_ERROR(Positive(r, "num_feedforward_networks", m.ffns));
  TS_ASSIGN_OR_RETURN(std::string norm, r.String("normalization_type", "no_norm"));
  if (norm != "no_norm" && norm != "layer_norm")
    return r.Error("normalization_type", "unknown '" + norm + "' (no_norm or layer_norm)");
  m.no_norm = norm == "no_norm";
  TS_ASSIGN_OR_RETURN(bool activate, r.Bool("classifier_activation", true));
  if (!activate)
    return r.Error("classifier_activation", "false is not supported (a pooler without dense)");
  // MobileBertConfig: true_hidden_size is intra_bottleneck_size with the bottleneck.
  m.true_hidden = m.use_bottleneck ? m.bottleneck : c.hidden;
  if (!m.use_bottleneck) m.bottleneck_attention = m.kq_shared = false;
  // Without either attention bottleneck the query and key read the hidden states through
  // Linears of true_hidden_size inputs (MobileBertSelfAttention): they must agree.
  if (m.use_bottleneck && !m.bottleneck_attention && !m.kq_shared && m.bottleneck != c.hidden) {
    return r.Error("key_query_shared_bottleneck",
                   "false needs use_bottleneck_attention or intra_bottleneck_size == hidden_size");
  }
  if (m.true_hidden % c.heads != 0) {
    return r.Error("num_attention_heads",
                   "must divide the true hidden size (" + std::to_string(m.true_hidden) + ")");
  }
  c.stack = [m](const Recipe& rec) { return std::make_unique<MobileBertStack>(rec, m); };
  return OkStatus();
}

Status ParseMobileBertLate(const ConfigReader& r, const json&, Recipe& c) {
  if (c.embedding >= c.hidden) {
    c.lm_error = r.Name("embedding_size") +
                 ": must be below hidden_size for the LM decoder's extra rows (got " +
                 std::to_string(c.embedding) + " >= " + std::to_string(c.hidden) + ")";
  }
  return OkStatus();
}

// The bottleneck by the hidden ratio (at least 8 per head), the intermediate size by its ratio
// to the true hidden size it expands.
void ScaleMobileBert(const Recipe& real, json& t) {
  const int64_t hidden = t["hidden_size"].get<int64_t>();
  const int64_t heads = t["num_attention_heads"].get<int64_t>();
  const bool bottlenecked = t.value("use_bottleneck", true);
  const int64_t bottleneck = t.value("intra_bottleneck_size", int64_t{128});
  const int64_t tiny_bottleneck =
      std::max(ScaleRatio(bottleneck, real.hidden, hidden, 8), 8 * heads);
  t["intra_bottleneck_size"] = tiny_bottleneck;
  t["intermediate_size"] = ScaleRatio(real.inter, bottlenecked ? bottleneck : real.hidden,
                                      bottlenecked ? tiny_bottleneck : hidden, 8);
}

}  // namespace

EncoderFamily MobileBert() {
  json example = BertExample();
  example["model_type"] = "mobilebert";
  example["hidden_size"] = 512;
  example["num_attention_heads"] = 4;
  example["num_hidden_layers"] = 24;
  example["intermediate_size"] = 512;
  example["hidden_act"] = "relu";
  example["embedding_size"] = 128;
  example["intra_bottleneck_size"] = 128;
  example["trigram_input"] = true;
  example["use_bottleneck"] = true;
  example["use_bottleneck_attention"] = false;
  example["key_query_shared_bottleneck"] = true;
  example["num_feedforward_networks"] = 4;
  example["normalization_type"] = "no_norm";
  example["classifier_activation"] = true;
  HeadNames names = BertHeadNames();
  names.lm_embedding_width = false;  // the transform is hidden -> hidden
  names.lm_extra = "cls.predictions.dense";
  return {
      .model_type = "mobilebert",
      .defaults = {.act = "relu", .embedding = 128},
      .structure = {.base = "mobilebert."},
      .names = names,
      .parse = ParseMobileBert,
      .parse_late = ParseMobileBertLate,
      .scale_extra = ScaleMobileBert,
      .classes = AllHeads("MobileBert", /*causal=*/false, /*nsp=*/true, /*qa=*/true,
                          /*pretraining=*/true),
      .example = example,
  };
}

TS_ZOO_ENCODER_FAMILY(MobileBert);

}  // namespace ts::zoo::internal::encoder
