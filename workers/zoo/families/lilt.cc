// lilt: LiLT (modeling_lilt.py) as a family stack on the encoder trunk (encoder.h Stack): a text
// stream (RoBERTa's embeddings with positions after the pad id, BERT layers) beside a layout
// stream at hidden_size / channel_shrink_ratio: layout_embeddings (the x / y / h / w tables of
// hidden_size / 6 over the bbox's left, upper, right, lower, height and width, concatenated,
// box_linear_embeddings, plus box_position_embeddings at the text's position ids, LayerNorm). In
// every layer both streams attend with the same scores, text q k^T / sqrt(d) plus layout
// q k^T / sqrt(d / ratio) (LiltSelfAttention adds them both ways round: the sums are equal, one
// softmax serves both), each over its own values, then each stream's output LayerNorm and FFN
// (layout_intermediate / layout_output at the shrunk widths). Heads: the tanh pooler, RoBERTa's
// classifier.dense / out_proj, the token classifier, qa_outputs; batches carry `bbox` as
// LayoutLM's do. hidden_size not divisible by 6 (the layout tables' concatenation must give
// hidden_size back), by channel_shrink_ratio or into heads divisible by it, and relative
// position_embedding_type are refused naming the field. SCUT-DLVCLab/lilt-roberta-en-base.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::encoder {
namespace {

struct LiltLayerW {
  std::string q, k, v, lq, lk, lv, o, o_norm, lo, lo_norm, inter, out, out_norm, linter, lout,
      lout_norm;
};

class LiltStack : public Stack {
 public:
  LiltStack(const Recipe& r, int64_t ratio) : r_(r), ratio_(ratio) {}

  void AddWeights(const std::string& p, const AddFn& add) override {
    const int64_t h = r_.hidden, lh = h / ratio_, six = h / 6;
    word_ = add(p + "embeddings.word_embeddings.weight", {r_.vocab, h});
    pos_ = add(p + "embeddings.position_embeddings.weight", {r_.max_pos, h});
    type_ = add(p + "embeddings.token_type_embeddings.weight", {r_.type_vocab, h});
    emb_norm_ = Norm(add, p + "embeddings.LayerNorm", h);
    const std::string le = p + "layout_embeddings.";
    for (const char* t : {"x", "y", "h", "w"})
      box_.push_back(add(le + t + "_position_embeddings.weight", {r_.max_2d, six}));
    box_pos_ = add(le + "box_position_embeddings.weight", {r_.max_pos, lh});
    box_linear_ = Linear(add, le + "box_linear_embeddings", lh, h);
    box_norm_ = Norm(add, le + "LayerNorm", lh);
    for (int64_t i = 0; i < r_.layers; ++i) {
      const std::string lp = p + "encoder.layer." + std::to_string(i) + ".";
      LiltLayerW l;
      l.q = Linear(add, lp + "attention.self.query", h, h);
      l.k = Linear(add, lp + "attention.self.key", h, h);
      l.v = Linear(add, lp + "attention.self.value", h, h);
      l.lq = Linear(add, lp + "attention.self.layout_query", lh, lh);
      l.lk = Linear(add, lp + "attention.self.layout_key", lh, lh);
      l.lv = Linear(add, lp + "attention.self.layout_value", lh, lh);
      l.o = Linear(add, lp + "attention.output.dense", h, h);
      l.o_norm = Norm(add, lp + "attention.output.LayerNorm", h);
      l.lo = Linear(add, lp + "attention.layout_output.dense", lh, lh);
      l.lo_norm = Norm(add, lp + "attention.layout_output.LayerNorm", lh);
      l.inter = Linear(add, lp + "intermediate.dense", r_.inter, h);
      l.out = Linear(add, lp + "output.dense", h, r_.inter);
      l.out_norm = Norm(add, lp + "output.LayerNorm", h);
      l.linter = Linear(add, lp + "layout_intermediate.dense", r_.inter / ratio_, lh);
      l.lout = Linear(add, lp + "layout_output.dense", lh, r_.inter / ratio_);
      l.lout_norm = Norm(add, lp + "layout_output.LayerNorm", lh);
      layers_.push_back(std::move(l));
    }
  }

  std::string WordEmbedding() const override { return word_; }

  void InitWeight(const std::string& name, at::Tensor& t) const override {
    // RoBERTa's position table and box_position_embeddings have padding_idx pad_token_id.
    if ((name == pos_ || name == box_pos_) && r_.pad) t[*r_.pad].zero_();
  }

  at::Tensor Encode(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                    const at::Tensor& types, const at::Tensor& blocked) const override {
    return EncodeBoxes(w, ids, mask, types, at::Tensor(), blocked);
  }

  at::Tensor EncodeBoxes(const WeightMap& w, const at::Tensor& ids, const at::Tensor&,
                         const at::Tensor& types, const at::Tensor& bbox,
                         const at::Tensor& blocked) const override {
    const int64_t pad = r_.pad.value_or(-1);
    const at::Tensor keep = ids.ne(pad).to(at::kLong);
    const at::Tensor pos = at::cumsum(keep, 1) * keep + pad;  // create_position_ids_from_input_ids
    const at::Tensor ty = types.defined() ? types : at::zeros_like(ids);
    at::Tensor x = nn::Embedding(GetWeight(w, word_), ids, pad) +
                   nn::Embedding(GetWeight(w, type_), ty) +
                   nn::Embedding(GetWeight(w, pos_), pos, pad);
    x = Ln(w, x, emb_norm_);
    at::Tensor lay = LayoutEmbed(
        w, bbox.defined() ? bbox : at::zeros({ids.size(0), ids.size(1), 4}, ids.options()), pos);
    for (const LiltLayerW& l : layers_) std::tie(x, lay) = Layer(w, l, x, lay, blocked);
    return x;
  }

 private:
  static std::string Linear(const AddFn& add, const std::string& n, int64_t out, int64_t in) {
    add(n + ".weight", {out, in});
    add(n + ".bias", {out});
    return n;
  }
  static std::string Norm(const AddFn& add, const std::string& n, int64_t width) {
    add(n + ".weight", {width});
    add(n + ".bias", {width});
    return n;
  }
  at::Tensor Ln(const WeightMap& w, const at::Tensor& x, const std::string& n) const {
    return nn::LayerNorm(x, GetWeight(w, n + ".weight"), GetWeight(w, n + ".bias"), r_.eps);
  }
  at::Tensor Lin(const WeightMap& w, const at::Tensor& x, const std::string& n) const {
    return nn::Linear(x, GetWeight(w, n + ".weight"), GetWeight(w, n + ".bias"));
  }

  // LiltLayoutEmbeddings.forward.
  at::Tensor LayoutEmbed(const WeightMap& w, const at::Tensor& bbox, const at::Tensor& pos) const {
    auto col = [&](int64_t i) { return bbox.select(-1, i); };
    const at::Tensor& xt = GetWeight(w, box_[0]);
    const at::Tensor& yt = GetWeight(w, box_[1]);
    const at::Tensor spatial =
        at::cat({nn::Embedding(xt, col(0)), nn::Embedding(yt, col(1)), nn::Embedding(xt, col(2)),
                 nn::Embedding(yt, col(3)), nn::Embedding(GetWeight(w, box_[2]), col(3) - col(1)),
                 nn::Embedding(GetWeight(w, box_[3]), col(2) - col(0))},
                -1);
    const at::Tensor box_pos = nn::Embedding(GetWeight(w, box_pos_), pos, r_.pad.value_or(-1));
    return Ln(w, Lin(w, spatial, box_linear_) + box_pos, box_norm_);
  }

  std::pair<at::Tensor, at::Tensor> Layer(const WeightMap& w, const LiltLayerW& l,
                                          const at::Tensor& x, const at::Tensor& lay,
                                          const at::Tensor& blocked) const {
    const int64_t n = x.size(0), s = x.size(1), nh = r_.heads, hd = r_.hidden / nh;
    const int64_t lhd = hd / ratio_;
    auto heads = [&](const at::Tensor& t, int64_t d) {
      return t.view({n, s, nh, d}).transpose(1, 2);
    };
    const at::Tensor lv = heads(Lin(w, lay, l.lv), lhd), lk = heads(Lin(w, lay, l.lk), lhd);
    const at::Tensor lq = heads(Lin(w, lay, l.lq), lhd);
    const at::Tensor q = heads(Lin(w, x, l.q), hd), k = heads(Lin(w, x, l.k), hd);
    const at::Tensor v = heads(Lin(w, x, l.v), hd);
    at::Tensor scores = nn::Matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(hd)) +
                        nn::Matmul(lq, lk.transpose(-1, -2)) / std::sqrt(static_cast<double>(lhd));
    scores = nn::MaskBlocked(scores, blocked);
    const at::Tensor probs = at::softmax(scores, -1);
    auto merge = [&](const at::Tensor& t) { return t.transpose(1, 2).reshape({n, s, -1}); };
    const at::Tensor a = Ln(w, Lin(w, merge(nn::Matmul(probs, v)), l.o) + x, l.o_norm);
    const at::Tensor la = Ln(w, Lin(w, merge(nn::Matmul(probs, lv)), l.lo) + lay, l.lo_norm);
    const at::Tensor y =
        Ln(w, Lin(w, nn::Activate(Lin(w, a, l.inter), r_.act), l.out) + a, l.out_norm);
    const at::Tensor ly =
        Ln(w, Lin(w, nn::Activate(Lin(w, la, l.linter), r_.act), l.lout) + la, l.lout_norm);
    return {y, ly};
  }

  Recipe r_;
  int64_t ratio_ = 4;
  std::string word_, pos_, type_, emb_norm_, box_pos_, box_linear_, box_norm_;
  std::vector<std::string> box_;  // x, y, h, w tables
  std::vector<LiltLayerW> layers_;
};

Status ParseLilt(const ConfigReader& r, const json&, Recipe& c) {
  TS_ASSIGN_OR_RETURN(int64_t ratio, r.Int("channel_shrink_ratio", 4));
  TS_RETURN_IF_ERROR(Positive(r, "channel_shrink_ratio", ratio));
  if (c.hidden % 6 != 0) return r.Error("hidden_size", "must be divisible by 6 (layout tables)");
  if ((c.hidden / c.heads) % ratio != 0 || c.inter % ratio != 0) {
    return r.Error("channel_shrink_ratio", "must divide the head size and intermediate_size (" +
                                               std::to_string(ratio) + ")");
  }
  TS_ASSIGN_OR_RETURN(c.max_2d, r.Int("max_2d_position_embeddings", 1024));
  TS_RETURN_IF_ERROR(Positive(r, "max_2d_position_embeddings", c.max_2d));
  c.stack = [ratio](const Recipe& rec) { return std::make_unique<LiltStack>(rec, ratio); };
  return OkStatus();
}

// A width divisible by 6, the heads and the shrink ratio: 24 per head (96 at 4 heads).
void ScaleLilt(const Recipe& real, json& t) {
  const int64_t heads = t["num_attention_heads"].get<int64_t>();
  const int64_t ratio = t.value("channel_shrink_ratio", int64_t{4});
  const int64_t per_head = 6 * ratio;  // divisible by 6 and the ratio
  const int64_t hidden = heads * per_head * ((16 + per_head - 1) / per_head);
  t["hidden_size"] = hidden;
  const int64_t inter = ScaleRatio(real.inter, real.hidden, hidden, 8);
  t["intermediate_size"] = (inter + ratio - 1) / ratio * ratio;
}

}  // namespace

EncoderFamily Lilt() {
  json example = RobertaExample("lilt", 50265, 0, 2);
  example["max_position_embeddings"] = 514;
  example["type_vocab_size"] = 1;
  example["layer_norm_eps"] = 1e-5;
  example["channel_shrink_ratio"] = 4;
  example["max_2d_position_embeddings"] = 1024;
  return {
      .model_type = "lilt",
      .structure = {.positions = Positions::kAfterPad, .base = "lilt."},
      .names = {.pooler = "pooler.dense",
                .seq_pooled = false,
                .seq_dense = "classifier.dense",
                .seq_out = "classifier.out_proj"},
      .absolute_positions = true,
      .parse = ParseLilt,
      .scale_extra = ScaleLilt,
      .classes = {.base = "LiltModel",
                  .seq_cls = "LiltForSequenceClassification",
                  .token_cls = "LiltForTokenClassification",
                  .qa = "LiltForQuestionAnswering"},
      .example = example,
  };
}

TS_ZOO_ENCODER_FAMILY(Lilt);

}  // namespace ts::zoo::internal::encoder
