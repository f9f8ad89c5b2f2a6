// markuplm: MarkupLM (modeling_markuplm.py, transformers 5) as a family stack on the encoder
// trunk (encoder.h Stack): RoBERTa's embeddings (positions after the pad id, the position table's
// pad row zero) plus the XPath embeddings: per depth d < max_depth a tag table and a subscript
// table (xpath_unit_hidden_size wide) over the batch's xpath_tags_seq / xpath_subs_seq
// [B, S, max_depth], each concatenated over the depths, the two sums through
// xpath_unitseq2_inner, ReLU, inner2emb; word + position + token type + xpath, LayerNorm. The
// trunk's BERT post-LN layers (Stack::BertLayers) whose self-attention adds the extended mask
// (1 - mask) * -10000 to the scores, as MarkupLMModel builds it, instead of masking. Heads:
// the tanh pooler (MarkupLMModel, MarkupLMForSequenceClassification's classifier on it), the token
// classifier and qa_outputs (no pooler). XPathEmbeddings.xpath_unitseq2_embeddings is built and
// never called: a state_dict entry. Batches: each token a path of 1 to max_depth tags in
// [0, tag_pad_id) and subscripts in [0, subs_pad_id), the rest of its depths and padded tokens
// the pad ids, as MarkupLMFeatureExtractor / the tokenizer pad them. Refused naming the field: pad
// ids outside their tables and relative position_embedding_type. microsoft/markuplm-base.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo::internal::encoder {
namespace {

struct XPathOptions {
  int64_t depth = 50, unit = 32, tags = 256, subs = 1024, tag_pad = 216, subs_pad = 1001;
};

class MarkupStack : public Stack {
 public:
  MarkupStack(const Recipe& r, XPathOptions o) : r_(r), o_(o) {}

  void AddWeights(const std::string& p, const AddFn& add) override {
    const int64_t h = r_.hidden, cat = o_.unit * o_.depth;
    word_ = add(p + "embeddings.word_embeddings.weight", {r_.vocab, h});
    pos_ = add(p + "embeddings.position_embeddings.weight", {r_.max_pos, h});
    const std::string x = p + "embeddings.xpath_embeddings.";
    inner_ = Linear(add, x + "xpath_unitseq2_inner", 4 * h, cat);
    inner2emb_ = Linear(add, x + "inner2emb", h, 4 * h);
    for (int64_t d = 0; d < o_.depth; ++d)
      tag_.push_back(
          add(x + "xpath_tag_sub_embeddings." + std::to_string(d) + ".weight", {o_.tags, o_.unit}));
    for (int64_t d = 0; d < o_.depth; ++d)
      sub_.push_back(add(x + "xpath_subs_sub_embeddings." + std::to_string(d) + ".weight",
                         {o_.subs, o_.unit}));
    type_ = add(p + "embeddings.token_type_embeddings.weight", {r_.type_vocab, h});
    emb_norm_ = p + "embeddings.LayerNorm";
    add(emb_norm_ + ".weight", {h});
    add(emb_norm_ + ".bias", {h});
  }

  std::string WordEmbedding() const override { return word_; }
  bool BertLayers() const override { return true; }

  void InitWeight(const std::string& name, at::Tensor& t) const override {
    if (name == pos_ && r_.pad) t[*r_.pad].zero_();  // padding_idx pad_token_id
  }

  // The embeddings over the batch's xpaths, and the extended mask every layer adds.
  Embedded Embed(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                 const at::Tensor& types, const TensorMap& inputs) const override {
    const int64_t n = ids.size(0), s = ids.size(1);
    at::Tensor tags = GetOptionalInput(inputs, "xpath_tags_seq");
    at::Tensor subs = GetOptionalInput(inputs, "xpath_subs_seq");
    if (!tags.defined()) tags = at::full({n, s, o_.depth}, o_.tag_pad, ids.options());
    if (!subs.defined()) subs = at::full({n, s, o_.depth}, o_.subs_pad, ids.options());
    const int64_t pad = r_.pad.value_or(-1);
    const at::Tensor keep = ids.ne(pad).to(at::kLong);
    const at::Tensor pos = at::cumsum(keep, 1) * keep + pad;  // create_position_ids_from_input_ids
    const at::Tensor ty = types.defined() ? types : at::zeros_like(ids);
    std::vector<at::Tensor> te, se;
    for (int64_t d = 0; d < o_.depth; ++d) {
      te.push_back(nn::Embedding(GetWeight(w, tag_[d]), tags.select(2, d)));
      se.push_back(nn::Embedding(GetWeight(w, sub_[d]), subs.select(2, d)));
    }
    const at::Tensor xpath =
        Lin(w, at::relu(Lin(w, at::cat(te, -1) + at::cat(se, -1), inner_)), inner2emb_);
    at::Tensor x = nn::Embedding(GetWeight(w, word_), ids, pad) +
                   nn::Embedding(GetWeight(w, pos_), pos, pad) +
                   nn::Embedding(GetWeight(w, type_), ty) + xpath;
    x = nn::LayerNorm(x, GetWeight(w, emb_norm_ + ".weight"), GetWeight(w, emb_norm_ + ".bias"),
                      r_.eps);
    at::Tensor ext;
    if (mask.defined()) ext = (1 - mask.to(x.scalar_type())).view({n, 1, 1, s}) * -10000.0;
    return {std::move(x), std::move(ext)};
  }

  // MarkupLMSelfAttention: the scaled scores plus the extended mask `ext` (the trunk's blocked
  // keys unused), softmax.
  at::Tensor SelfAttention(const WeightMap& w, const std::string& self, const at::Tensor& x,
                           const at::Tensor&, const at::Tensor& ext) const override {
    const int64_t n = x.size(0), s = x.size(1), nh = r_.heads, hd = r_.hidden / nh;
    auto heads = [&](const at::Tensor& t) { return t.view({n, s, nh, hd}).transpose(1, 2); };
    at::Tensor scores = nn::Matmul(heads(Lin(w, x, self + "query")),
                                   heads(Lin(w, x, self + "key")).transpose(-1, -2)) *
                        (1.0 / std::sqrt(static_cast<double>(hd)));
    if (ext.defined()) scores = scores + ext;
    return nn::Matmul(at::softmax(scores, -1), heads(Lin(w, x, self + "value")));
  }

  void AddInputs(Head, at::Generator& gen, at::Tensor& ids, const at::Tensor& mask,
                 TensorMap& inputs) const override {
    const int64_t n = ids.size(0), s = ids.size(1);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    const at::Tensor len = at::randint(1, o_.depth + 1, {n, s, 1}, gen, lopts);
    const at::Tensor deep = at::arange(o_.depth, lopts).view({1, 1, -1}).ge(len);
    const at::Tensor pad = mask.eq(0).unsqueeze(-1);
    at::Tensor tags = at::randint(0, o_.tag_pad, {n, s, o_.depth}, gen, lopts);
    at::Tensor subs = at::randint(0, o_.subs_pad, {n, s, o_.depth}, gen, lopts);
    inputs["xpath_tags_seq"] = tags.masked_fill(deep.logical_or(pad), o_.tag_pad);
    inputs["xpath_subs_seq"] = subs.masked_fill(deep.logical_or(pad), o_.subs_pad);
  }

 private:
  static std::string Linear(const AddFn& add, const std::string& n, int64_t out, int64_t in) {
    add(n + ".weight", {out, in});
    add(n + ".bias", {out});
    return n;
  }
  static at::Tensor Lin(const WeightMap& w, const at::Tensor& x, const std::string& n) {
    return nn::Linear(x, GetWeight(w, n + ".weight"), GetWeight(w, n + ".bias"));
  }

  Recipe r_;
  XPathOptions o_;
  std::string word_, pos_, type_, emb_norm_, inner_, inner2emb_;
  std::vector<std::string> tag_, sub_;
};

Status ParseMarkupLm(const ConfigReader& r, const json&, Recipe& c) {
  XPathOptions o;
  const std::vector<std::pair<const char*, int64_t*>> sizes = {
      {"max_depth", &o.depth},
      {"xpath_unit_hidden_size", &o.unit},
      {"max_xpath_tag_unit_embeddings", &o.tags},
      {"max_xpath_subs_unit_embeddings", &o.subs}};
  for (const auto& [field, dst] : sizes) {
    TS_ASSIGN_OR_RETURN(*dst, r.Int(field, *dst));
    TS_RETURN_IF_ERROR(Positive(r, field, *dst));
  }
  TS_ASSIGN_OR_RETURN(o.tag_pad, r.Int("tag_pad_id", o.tag_pad));
  if (o.tag_pad < 1 || o.tag_pad >= o.tags)
    return r.Error("tag_pad_id", "must lie in [1, max_xpath_tag_unit_embeddings)");
  TS_ASSIGN_OR_RETURN(o.subs_pad, r.Int("subs_pad_id", o.subs_pad));
  if (o.subs_pad < 1 || o.subs_pad >= o.subs)
    return r.Error("subs_pad_id", "must lie in [1, max_xpath_subs_unit_embeddings)");
  c.stack = [o](const Recipe& rec) { return std::make_unique<MarkupStack>(rec, o); };
  return OkStatus();
}

// Four depths of 8-wide units: the per-depth tables and their concatenation stay, small.
void ScaleMarkupLm(const Recipe&, json& t) {
  t["max_depth"] = std::min<int64_t>(t.value("max_depth", int64_t{50}), 4);
  t["xpath_unit_hidden_size"] =
      std::min<int64_t>(t.value("xpath_unit_hidden_size", int64_t{32}), 8);
}

// XPathEmbeddings.xpath_unitseq2_embeddings: built, never called.
void MarkupLmStateDictExtra(StateDictBuilder& sd) {
  for (const std::string& base : {std::string("markuplm."), std::string()}) {
    const std::string inner = base + "embeddings.xpath_embeddings.xpath_unitseq2_inner.weight";
    if (!sd.HasWeight(inner)) continue;
    const std::vector<int64_t>& s = sd.weights().at(inner);  // [4 H, unit * depth]
    const std::string n = base + "embeddings.xpath_embeddings.xpath_unitseq2_embeddings.";
    sd.AddUnused(n + "weight", {s[0] / 4, s[1]});
    sd.AddUnused(n + "bias", {s[0] / 4});
    return;
  }
}

}  // namespace

EncoderFamily MarkupLm() {
  json example = RobertaExample("markuplm", 50267, 0, 2);
  example["max_position_embeddings"] = 514;
  example["type_vocab_size"] = 1;
  example["layer_norm_eps"] = 1e-5;
  example["max_depth"] = 50;
  example["xpath_unit_hidden_size"] = 32;
  example["max_xpath_tag_unit_embeddings"] = 256;
  example["max_xpath_subs_unit_embeddings"] = 1024;
  example["tag_pad_id"] = 216;
  example["subs_pad_id"] = 1001;
  return {
      .model_type = "markuplm",
      .structure = {.positions = Positions::kAfterPad, .base = "markuplm."},
      .names = {.pooler = "pooler.dense"},
      .absolute_positions = true,
      .parse = ParseMarkupLm,
      .scale_extra = ScaleMarkupLm,
      .classes = {.base = "MarkupLMModel",
                  .seq_cls = "MarkupLMForSequenceClassification",
                  .token_cls = "MarkupLMForTokenClassification",
                  .qa = "MarkupLMForQuestionAnswering"},
      .example = example,
      .state_dict = {.extra = MarkupLmStateDictExtra},
  };
}

TS_ZOO_ENCODER_FAMILY(MarkupLm);

}  // namespace ts::zoo::internal::encoder
