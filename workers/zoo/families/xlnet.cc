// xlnet: XLNet (modeling_xlnet.py) as a family stack on the encoder trunk (encoder.h Stack), the
// content stream of attn_type "bi" without mems, perm_mask or target_mapping (what every head
// runs on its inputs): transformer.word_embedding; per layer rel_attn with q / k / v / o / r
// [d_model, n_head, d_head], the content score (q + r_w_bias) . k, the position score
// (q + r_r_bias) . (pos_emb @ r) over the sinusoid of arange(S, -S, -1) (clamp_len) through
// rel_shift_bnij, the segment score (q + r_s_bias) . seg_embed[token types differ], all *
// d_head^-0.5 minus 1e30 on padded keys other than the query itself (non_tgt_mask), then o, the
// residual and layer_norm; ff (layer_1, ff_activation, layer_2, residual, layer_norm). Heads:
// XLNetLMHeadModel's lm_loss tied to word_embedding with its bias, cross entropy over every
// labelled position unshifted (XLNet's loss, a family head); sequence_summary.summary (last token,
// tanh) then logits_proj for sequence classification and multiple choice; classifier; qa_outputs
// (XLNetForQuestionAnsweringSimple). attn_type "uni", bi_data and summary settings other than
// last / projection / tanh are refused naming the field. xlnet/xlnet-base-cased.
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal::encoder {
namespace {

struct XlnetLayerW {
  std::string q, k, v, o, r, rr, rs, rw, seg, attn_norm, ff_norm, ff1, ff2;
};

// XLNetLMHeadModel: logits = lm_loss(h) (tied), CrossEntropyLoss over logits.view(-1, V) and
// labels.view(-1): no shift.
class XlnetLmHead : public TextHead {
 public:
  explicit XlnetLmHead(TextHeadSpec spec) : TextHead(std::move(spec)) {}
  WeightShapeList Weights() const override { return LinearWeights(spec_.vocab); }
  std::vector<std::string> OutputNames() const override { return {"logits"}; }
  std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& h,
                                  const at::Tensor&) const override {
    return {Project(w, h)};
  }
  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    return PerTokenCrossEntropy(out[0], GetInput(labels, "labels"));
  }
  void AddLabels(at::Generator&, const at::Tensor& ids, const at::Tensor& mask,
                 TensorMap& labels) const override {
    labels["labels"] = ids.masked_fill(mask.eq(0), -100);
  }
};

class XlnetStack : public Stack {
 public:
  XlnetStack(const Recipe& r, int64_t clamp_len) : r_(r), clamp_len_(clamp_len) {}

  void AddWeights(const std::string& p, const AddFn& add) override {
    const int64_t h = r_.hidden, nh = r_.heads, d = h / nh;
    word_ = add(p + "word_embedding.weight", {r_.vocab, h});
    for (int64_t i = 0; i < r_.layers; ++i) {
      const std::string lp = p + "layer." + std::to_string(i) + ".";
      const std::string a = lp + "rel_attn.";
      XlnetLayerW l;
      l.q = add(a + "q", {h, nh, d});
      l.k = add(a + "k", {h, nh, d});
      l.v = add(a + "v", {h, nh, d});
      l.o = add(a + "o", {h, nh, d});
      l.r = add(a + "r", {h, nh, d});
      l.rr = add(a + "r_r_bias", {nh, d});
      l.rs = add(a + "r_s_bias", {nh, d});
      l.rw = add(a + "r_w_bias", {nh, d});
      l.seg = add(a + "seg_embed", {2, nh, d});
      l.attn_norm = Norm(add, a + "layer_norm");
      l.ff_norm = Norm(add, lp + "ff.layer_norm");
      l.ff1 = Linear(add, lp + "ff.layer_1", r_.inter, h);
      l.ff2 = Linear(add, lp + "ff.layer_2", h, r_.inter);
      layers_.push_back(std::move(l));
    }
  }

  std::string WordEmbedding() const override { return word_; }

  at::Tensor Encode(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                    const at::Tensor& types, const at::Tensor&) const override {
    at::Tensor x = nn::Embedding(GetWeight(w, word_), ids);
    const at::ScalarType dt = x.scalar_type();
    const int64_t s = ids.size(1);
    // non_tgt_mask: padded keys, except each query's own position.
    at::Tensor penalty;
    if (mask.defined()) {
      const at::Tensor eye = at::eye(s, ids.options().dtype(dt));
      const at::Tensor pad = (1 - mask).to(dt).unsqueeze(1);     // [N, 1, S]
      penalty = ((pad - eye).gt(0)).to(dt).unsqueeze(1) * 1e30;  // [N, 1, S, S]
    }
    at::Tensor seg;  // [N, S, S, 2]: one-hot of (type_i != type_j)
    if (types.defined())
      seg = at::one_hot(types.unsqueeze(2).ne(types.unsqueeze(1)).to(at::kLong), 2).to(dt);
    const at::Tensor pos = PositionEmbedding(s, ids.device(), dt);
    for (const XlnetLayerW& l : layers_) x = Layer(w, l, x, pos, seg, penalty);
    return x;
  }

  std::unique_ptr<TextHead> FamilyHead(Head kind, const TextHeadSpec& spec) const override {
    if (kind != Head::kCausalLM) return nullptr;
    return std::make_unique<XlnetLmHead>(spec);
  }

 private:
  static std::string Linear(const AddFn& add, const std::string& n, int64_t out, int64_t in) {
    add(n + ".weight", {out, in});
    add(n + ".bias", {out});
    return n;
  }
  std::string Norm(const AddFn& add, const std::string& n) const {
    add(n + ".weight", {r_.hidden});
    add(n + ".bias", {r_.hidden});
    return n;
  }
  at::Tensor Ln(const WeightMap& w, const at::Tensor& x, const std::string& n) const {
    return nn::LayerNorm(x, GetWeight(w, n + ".weight"), GetWeight(w, n + ".bias"), r_.eps);
  }
  // einsum("ibh,hnd->ibnd") as a Linear over [N, S, d_model] -> [N, heads, S, d_head].
  at::Tensor Heads(const WeightMap& w, const at::Tensor& x, const std::string& n) const {
    const int64_t nh = r_.heads, d = r_.hidden / nh;
    const at::Tensor weight = GetWeight(w, n).reshape({r_.hidden, nh * d}).t();
    const at::Tensor y = nn::Linear(x, weight);
    return y.view({x.size(0), x.size(1), nh, d}).transpose(1, 2);
  }

  // relative_positional_encoding (bi, no bi_data): [2S, d_model], sin then cos.
  at::Tensor PositionEmbedding(int64_t s, const at::Device& dev, at::ScalarType dt) const {
    const auto fopts = at::TensorOptions().dtype(at::kFloat).device(dev);
    const at::Tensor freq = at::arange(0, r_.hidden, 2, fopts.dtype(at::kLong)).to(at::kFloat);
    const at::Tensor inv = 1.0 / at::pow(10000.0, freq / static_cast<double>(r_.hidden));
    at::Tensor seq = at::arange(s, -s, -1, fopts.dtype(at::kLong)).to(at::kFloat);
    if (clamp_len_ > 0) seq = seq.clamp(-clamp_len_, clamp_len_);
    const at::Tensor angle = seq.unsqueeze(1) * inv.unsqueeze(0);
    return at::cat({at::sin(angle), at::cos(angle)}, -1).to(dt);
  }

  // rel_shift_bnij: [N, H, S, 2S] viewed [N, H, 2S, S], first row dropped, viewed
  // [N, H, S, 2S - 1], the first S columns.
  static at::Tensor RelShift(const at::Tensor& x) {
    const int64_t n = x.size(0), h = x.size(1), i = x.size(2), j = x.size(3);
    const at::Tensor y = x.reshape({n, h, j, i}).narrow(2, 1, j - 1).reshape({n, h, i, j - 1});
    return y.narrow(3, 0, i);
  }

  at::Tensor Layer(const WeightMap& w, const XlnetLayerW& l, const at::Tensor& x,
                   const at::Tensor& pos, const at::Tensor& seg, const at::Tensor& penalty) const {
    const int64_t n = x.size(0), s = x.size(1), nh = r_.heads, d = r_.hidden / nh;
    const at::Tensor q = Heads(w, x, l.q), k = Heads(w, x, l.k), v = Heads(w, x, l.v);
    auto bias = [&](const std::string& b) { return GetWeight(w, b).view({1, nh, 1, d}); };
    at::Tensor score = nn::Matmul(q + bias(l.rw), k.transpose(-1, -2));
    const at::Tensor kr = Heads(w, pos.unsqueeze(0), l.r);  // [1, heads, 2S, d]
    score = score + RelShift(nn::Matmul(q + bias(l.rr), kr.transpose(-1, -2)));
    if (seg.defined()) {
      // (q + r_s_bias) . seg_embed[s] per head: [N, heads, S, 2], picked per (i, j).
      const at::Tensor se = GetWeight(w, l.seg).permute({1, 2, 0}).unsqueeze(0);  // [1, h, d, 2]
      const at::Tensor ef = nn::Matmul(q + bias(l.rs), se);                       // [N, h, S, 2]
      score = score + (seg.unsqueeze(1) * ef.unsqueeze(3)).sum(-1);
    }
    score = score * (1.0 / std::sqrt(static_cast<double>(d)));
    if (penalty.defined()) score = score - penalty;
    const at::Tensor ctx =
        nn::Matmul(at::softmax(score, -1), v).transpose(1, 2).reshape({n, s, nh * d});
    // einsum("ibnd,hnd->ibh", attn_vec, o).
    const at::Tensor out = nn::Linear(ctx, GetWeight(w, l.o).reshape({r_.hidden, nh * d}));
    const at::Tensor a = Ln(w, out + x, l.attn_norm);
    const at::Tensor f = nn::Linear(
        nn::Activate(nn::Linear(a, GetWeight(w, l.ff1 + ".weight"), GetWeight(w, l.ff1 + ".bias")),
                     r_.act),
        GetWeight(w, l.ff2 + ".weight"), GetWeight(w, l.ff2 + ".bias"));
    return Ln(w, f + a, l.ff_norm);
  }

  Recipe r_;
  int64_t clamp_len_ = -1;
  std::string word_;
  std::vector<XlnetLayerW> layers_;
};

Status ParseXlnet(const ConfigReader& r, const json&, Recipe& c) {
  TS_ASSIGN_OR_RETURN(std::string attn, r.String("attn_type", "bi"));
  if (attn != "bi") return r.Error("attn_type", "only \"bi\" is supported (got '" + attn + "')");
  TS_ASSIGN_OR_RETURN(bool bi_data, r.Bool("bi_data", false));
  if (bi_data) return r.Error("bi_data", "true is not supported");
  TS_ASSIGN_OR_RETURN(int64_t clamp_len, r.Int("clamp_len", -1));
  if (r.Has("d_head") && !r.IsNull("d_head")) {
    TS_ASSIGN_OR_RETURN(int64_t d_head, r.Int("d_head"));
    if (d_head != c.hidden / c.heads) return r.Error("d_head", "must be d_model / n_head");
  }
  // XLNetSequenceSummary: the last token, projected at d_model, tanh.
  TS_ASSIGN_OR_RETURN(std::string type, r.String("summary_type", "last"));
  TS_ASSIGN_OR_RETURN(bool use_proj, r.Bool("summary_use_proj", true));
  TS_ASSIGN_OR_RETURN(bool to_labels, r.Bool("summary_proj_to_labels", false));
  std::string act = "tanh";
  if (!r.IsNull("summary_activation")) {
    TS_ASSIGN_OR_RETURN(act, r.String("summary_activation", "tanh"));
  }
  c.summary_last = true;
  if (type != "last") {
    c.summary_error = r.Name("summary_type") + ": unsupported '" + type + "' (last)";
  } else if (!use_proj || to_labels) {
    c.summary_error = r.Name(use_proj ? "summary_proj_to_labels" : "summary_use_proj") +
                      ": unsupported (a d_model projection only)";
  } else if (act != "tanh") {
    c.summary_error = r.Name("summary_activation") + ": unsupported '" + act + "' (tanh)";
  }
  c.stack = [clamp_len](const Recipe& rec) { return std::make_unique<XlnetStack>(rec, clamp_len); };
  return OkStatus();
}

// d_head follows the tiny width.
void ScaleXlnet(const Recipe&, json& t) {
  if (t.contains("d_head")) t["d_head"] = t["d_model"].get<int64_t>() / t["n_head"].get<int64_t>();
}

// mask_emb: the query stream's embedding, a parameter the content stream never reads;
// XLNetLMHeadModel's lm_loss.weight: word_embedding.
void XlnetStateDictExtra(StateDictBuilder& sd) {
  for (const auto& [n, s] : sd.weights()) {
    const std::string key = "word_embedding.weight";
    if (n.size() >= key.size() && n.compare(n.size() - key.size(), key.size(), key) == 0) {
      if (sd.HasWeight("lm_loss.bias")) sd.AddTied("lm_loss.weight", n);
      sd.AddUnused(n.substr(0, n.size() - key.size()) + "mask_emb", {1, 1, s[1]});
      return;
    }
  }
}

}  // namespace

EncoderFamily Xlnet() {
  const json example = {{"model_type", "xlnet"},
                        {"d_model", 768},
                        {"n_layer", 12},
                        {"n_head", 12},
                        {"d_head", 64},
                        {"d_inner", 3072},
                        {"ff_activation", "gelu"},
                        {"vocab_size", 32000},
                        {"attn_type", "bi"},
                        {"bi_data", false},
                        {"clamp_len", -1},
                        {"mem_len", nullptr},
                        {"same_length", false},
                        {"layer_norm_eps", 1e-12},
                        {"pad_token_id", 5},
                        {"bos_token_id", 1},
                        {"eos_token_id", 2},
                        {"summary_type", "last"},
                        {"summary_use_proj", true},
                        {"summary_activation", "tanh"},
                        {"summary_last_dropout", 0.1},
                        {"start_n_top", 5},
                        {"end_n_top", 5}};
  return {
      .model_type = "xlnet",
      .fields = {.hidden = "d_model",
                 .layers = "n_layer",
                 .heads = "n_head",
                 .inter = "d_inner",
                 .act = "ff_activation"},
      .defaults = {.pad = 5},
      .structure = {.base = "transformer."},
      .names = {.seq_pooled = false,
                .seq_dense = "sequence_summary.summary",
                .seq_act = DenseAct::kTanh,
                .seq_out = "logits_proj",
                .choice_pooled = false,
                .choice_dense = "sequence_summary.summary",
                .choice_act = DenseAct::kTanh,
                .choice_out = "logits_proj",
                .lm_bias = "lm_loss"},
      .parse = ParseXlnet,
      .scale_extra = ScaleXlnet,
      .classes = {.base = "XLNetModel",
                  .seq_cls = "XLNetForSequenceClassification",
                  .token_cls = "XLNetForTokenClassification",
                  .qa = "XLNetForQuestionAnsweringSimple",
                  .multiple_choice = "XLNetForMultipleChoice",
                  .causal_lm = "XLNetLMHeadModel"},
      .example = example,
      .state_dict = {.extra = XlnetStateDictExtra},
  };
}

TS_ZOO_ENCODER_FAMILY(Xlnet);

}  // namespace ts::zoo::internal::encoder
