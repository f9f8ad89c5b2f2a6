// layoutlmv3: LayoutLMv3 (modeling_layoutlmv3.py, transformers 5) as a family stack on the
// encoder trunk (encoder.h Stack), text only: the model run without pixel_values, as
// transformers allows (the visual modules patch_embed, cls_token, pos_embed, LayerNorm and norm
// exist when visual_embed and are state_dict entries nothing calls). LayoutLMv3TextEmbeddings:
// word + token type, + RoBERTa's positions after the pad id, + the concatenated x0 / y0 / x1 / y1
// (coordinate_size) and clipped height / width (shape_size) lookups of the batch's bbox,
// LayerNorm. The trunk's BERT post-LN layers (Stack::BertLayers) with LayoutLMv3SelfAttention,
// whose scores are (q / sqrt(d)) k^T plus (rel_pos + rel_2d_pos) / sqrt(d): T5-style buckets of
// key - query over arange positions (rel_pos_bins, max_rel_pos) and over the boxes' x0 and y1
// (rel_2d_pos_bins, max_rel_2d_pos), computed once per forward, looked up in the transposed
// rel_pos_bias / rel_pos_x_bias / rel_pos_y_bias weights under no_grad (no gradient reaches
// them), then the extended mask and the CogView softmax (scores / 32 minus their row max, times
// 32). Heads: LayoutLMv3ClassificationHead (dense, tanh, out_proj) over token 0 for sequence
// classification, over every token for QA (qa_outputs) and for token classification from 10
// labels (below: the Linear `classifier`); no pooler. Refused naming the field: coordinate and
// shape sizes that do not make hidden_size, text_embed false and a relative
// position_embedding_type. microsoft/layoutlmv3-base.
#include <cmath>
#include <limits>
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

// LayoutLMv3SelfAttention.cogview_attention's alpha.
constexpr double kCogviewAlpha = 32;
// LayoutLMv3ForTokenClassification: a Linear below this many labels, the classification head
// from it.
constexpr int64_t kTokenHeadLabels = 10;

struct V3Options {
  int64_t coord = 128, shape = 128;
  bool rel = true, spatial = true;
  int64_t rel_bins = 32, max_rel = 128, rel_2d_bins = 64, max_rel_2d = 256;
};

// LayoutLMv3Encoder.relative_position_bucket (bidirectional) of key - query offsets.
at::Tensor Buckets(const at::Tensor& rel, int64_t num_buckets, int64_t max_distance) {
  const int64_t half = num_buckets / 2, max_exact = half / 2;
  const at::Tensor n = rel.abs();
  at::Tensor large = (at::log(n.to(at::kFloat) / static_cast<double>(max_exact)) /
                      std::log(static_cast<double>(max_distance) / max_exact) *
                      static_cast<double>(half - max_exact))
                         .to(at::kLong) +
                     max_exact;
  large = at::clamp_max(large, half - 1);
  return rel.gt(0).to(at::kLong) * half + at::where(n.lt(max_exact), n, large);
}

// LayoutLMv3ClassificationHead(pool_feature=False) before a trunk head: `block`.dense, tanh,
// then the trunk head's Linear under `block`.out_proj (its loss and labels unchanged).
class DenseTanhHead : public TextHead {
 public:
  DenseTanhHead(TextHeadSpec spec, std::string block) : TextHead(spec), block_(std::move(block)) {
    spec.name = block_ + ".out_proj";
    spec.bias = true;
    inner_ = MakeTextHead(std::move(spec));
  }
  WeightShapeList Weights() const override {
    WeightShapeList out = {{block_ + ".dense.weight", {spec_.hidden, spec_.hidden}},
                           {block_ + ".dense.bias", {spec_.hidden}}};
    for (auto& w : inner_->Weights()) out.push_back(std::move(w));
    return out;
  }
  std::vector<std::string> OutputNames() const override { return inner_->OutputNames(); }
  std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& x,
                                  const at::Tensor& mask) const override {
    const at::Tensor d = at::tanh(nn::Linear(x, GetWeight(w, block_ + ".dense.weight"),
                                             GetWeight(w, block_ + ".dense.bias")));
    return inner_->Forward(w, d, mask);
  }
  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    return inner_->Loss(out, labels);
  }
  void AddLabels(at::Generator& gen, const at::Tensor& ids, const at::Tensor& mask,
                 TensorMap& labels) const override {
    inner_->AddLabels(gen, ids, mask, labels);
  }

 private:
  std::string block_;
  std::unique_ptr<TextHead> inner_;
};

class V3Stack : public Stack {
 public:
  V3Stack(const Recipe& r, V3Options o) : r_(r), o_(o) {}

  void AddWeights(const std::string& p, const AddFn& add) override {
    const int64_t h = r_.hidden;
    word_ = add(p + "embeddings.word_embeddings.weight", {r_.vocab, h});
    type_ = add(p + "embeddings.token_type_embeddings.weight", {r_.type_vocab, h});
    emb_norm_ = p + "embeddings.LayerNorm";
    add(emb_norm_ + ".weight", {h});
    add(emb_norm_ + ".bias", {h});
    pos_ = add(p + "embeddings.position_embeddings.weight", {r_.max_pos, h});
    for (const char* t : {"x", "y"})
      box_.push_back(
          add(p + "embeddings." + t + "_position_embeddings.weight", {r_.max_2d, o_.coord}));
    for (const char* t : {"h", "w"})
      box_.push_back(
          add(p + "embeddings." + t + "_position_embeddings.weight", {r_.max_2d, o_.shape}));
  }

  // LayoutLMv3Encoder's relative bias tables, registered after its layers.
  void AddEncoderWeights(const std::string& p, const AddFn& add) override {
    if (o_.rel) rel_ = add(p + "encoder.rel_pos_bias.weight", {r_.heads, o_.rel_bins});
    if (o_.spatial) {
      rel_x_ = add(p + "encoder.rel_pos_x_bias.weight", {r_.heads, o_.rel_2d_bins});
      rel_y_ = add(p + "encoder.rel_pos_y_bias.weight", {r_.heads, o_.rel_2d_bins});
    }
  }

  std::string WordEmbedding() const override { return word_; }
  bool BertLayers() const override { return true; }

  void InitWeight(const std::string& name, at::Tensor& t) const override {
    if (name == pos_ && r_.pad) t[*r_.pad].zero_();  // padding_idx pad_token_id
  }

  // The embeddings over the batch's bbox, and the relative bias every layer adds.
  Embedded Embed(const WeightMap& w, const at::Tensor& ids, const at::Tensor&,
                 const at::Tensor& types, const TensorMap& inputs) const override {
    const int64_t n = ids.size(0), s = ids.size(1);
    const at::Tensor bbox_in = GetOptionalInput(inputs, "bbox");
    const at::Tensor bbox = bbox_in.defined() ? bbox_in : at::zeros({n, s, 4}, ids.options());
    at::Tensor x = TextEmbeddings(w, ids, types, bbox);
    // (rel_pos [+ rel_2d_pos]) [N or 1, heads, S, S]: LayoutLMv3SelfAttention adds the spatial
    // term only beside the 1D one (has_spatial_attention_bias alone adds nothing).
    at::Tensor bias;
    if (o_.rel) {
      const at::Tensor pos = at::arange(s, ids.options());
      bias = Lookup(
          w, rel_,
          Buckets(pos.unsqueeze(0) - pos.unsqueeze(1), o_.rel_bins, o_.max_rel).unsqueeze(0));
      if (o_.spatial) {
        auto rel2d = [&](int64_t col, const std::string& table) {
          const at::Tensor c = bbox.select(-1, col);
          return Lookup(w, table,
                        Buckets(c.unsqueeze(-2) - c.unsqueeze(-1), o_.rel_2d_bins, o_.max_rel_2d));
        };
        bias = bias + (rel2d(0, rel_x_) + rel2d(3, rel_y_));
      }
    }
    return {std::move(x), std::move(bias)};
  }

  // LayoutLMv3SelfAttention: (q / sqrt(d)) k^T + bias / sqrt(d), masked, the CogView softmax.
  at::Tensor SelfAttention(const WeightMap& w, const std::string& self, const at::Tensor& x,
                           const at::Tensor& blocked, const at::Tensor& bias) const override {
    const int64_t n = x.size(0), s = x.size(1), nh = r_.heads, hd = r_.hidden / nh;
    auto heads = [&](const at::Tensor& t) { return t.view({n, s, nh, hd}).transpose(1, 2); };
    const double root = std::sqrt(static_cast<double>(hd));
    at::Tensor scores = nn::Matmul(heads(Lin(w, x, self + "query")) / root,
                                   heads(Lin(w, x, self + "key")).transpose(-1, -2));
    if (bias.defined()) scores = scores + bias / root;
    scores = nn::MaskBlocked(scores, blocked);
    const at::Tensor scaled = scores / kCogviewAlpha;  // cogview_attention
    const at::Tensor probs = at::softmax((scaled - at::amax(scaled, -1, true)) * kCogviewAlpha, -1);
    return nn::Matmul(probs, heads(Lin(w, x, self + "value")));
  }

  std::unique_ptr<TextHead> FamilyHead(Head kind, const TextHeadSpec& spec) const override {
    if (kind == Head::kQA) return std::make_unique<DenseTanhHead>(spec, "qa_outputs");
    if (kind == Head::kTokenCls && spec.num_labels >= kTokenHeadLabels)
      return std::make_unique<DenseTanhHead>(spec, "classifier");
    return nullptr;
  }

 private:
  static at::Tensor Lin(const WeightMap& w, const at::Tensor& x, const std::string& n) {
    return nn::Linear(x, GetWeight(w, n + ".weight"), GetWeight(w, n + ".bias"));
  }

  // weight.t()[buckets].permute(0, 3, 1, 2) under no_grad: [N, S, S] buckets -> [N, heads, S, S].
  static at::Tensor Lookup(const WeightMap& w, const std::string& name, const at::Tensor& b) {
    const at::Tensor table = GetWeight(w, name).detach().t();
    return nn::Embedding(table, b).permute({0, 3, 1, 2});
  }

  at::Tensor TextEmbeddings(const WeightMap& w, const at::Tensor& ids, const at::Tensor& types,
                            const at::Tensor& bbox) const {
    const int64_t pad = r_.pad.value_or(-1);
    const at::Tensor keep = ids.ne(pad).to(at::kLong);
    const at::Tensor pos = at::cumsum(keep, 1) * keep + pad;
    const at::Tensor ty = types.defined() ? types : at::zeros_like(ids);
    at::Tensor x =
        nn::Embedding(GetWeight(w, word_), ids, pad) + nn::Embedding(GetWeight(w, type_), ty);
    x = x + nn::Embedding(GetWeight(w, pos_), pos, pad);
    auto col = [&](int64_t i) { return bbox.select(-1, i); };
    const at::Tensor spatial = at::cat(
        {nn::Embedding(GetWeight(w, box_[0]), col(0)), nn::Embedding(GetWeight(w, box_[1]), col(1)),
         nn::Embedding(GetWeight(w, box_[0]), col(2)), nn::Embedding(GetWeight(w, box_[1]), col(3)),
         nn::Embedding(GetWeight(w, box_[2]), at::clamp(col(3) - col(1), 0, 1023)),
         nn::Embedding(GetWeight(w, box_[3]), at::clamp(col(2) - col(0), 0, 1023))},
        -1);
    return nn::LayerNorm(x + spatial, GetWeight(w, emb_norm_ + ".weight"),
                         GetWeight(w, emb_norm_ + ".bias"), r_.eps);
  }

  Recipe r_;
  V3Options o_;
  std::string word_, type_, emb_norm_, pos_, rel_, rel_x_, rel_y_;
  std::vector<std::string> box_;  // x, y, h, w tables
};

Status ParseLayoutLmV3(const ConfigReader& r, const json&, Recipe& c) {
  V3Options o;
  TS_ASSIGN_OR_RETURN(bool text, r.Bool("text_embed", true));
  if (!text) return r.Error("text_embed", "false is unsupported (the zoo runs the text path)");
  TS_ASSIGN_OR_RETURN(o.coord, r.Int("coordinate_size", 128));
  TS_ASSIGN_OR_RETURN(o.shape, r.Int("shape_size", 128));
  if (o.coord <= 0 || o.shape <= 0 || 4 * o.coord + 2 * o.shape != c.hidden) {
    return r.Error("coordinate_size",
                   "4 * coordinate_size + 2 * shape_size must equal "
                   "hidden_size (" +
                       std::to_string(c.hidden) + ")");
  }
  TS_ASSIGN_OR_RETURN(o.rel, r.Bool("has_relative_attention_bias", true));
  TS_ASSIGN_OR_RETURN(o.spatial, r.Bool("has_spatial_attention_bias", true));
  const std::vector<std::pair<const char*, int64_t*>> sizes = {{"rel_pos_bins", &o.rel_bins},
                                                               {"max_rel_pos", &o.max_rel},
                                                               {"rel_2d_pos_bins", &o.rel_2d_bins},
                                                               {"max_rel_2d_pos", &o.max_rel_2d}};
  for (const auto& [field, dst] : sizes) {
    TS_ASSIGN_OR_RETURN(*dst, r.Int(field, *dst));
    if (*dst < 4) return r.Error(field, "must be at least 4 (the buckets' halves)");
  }
  TS_ASSIGN_OR_RETURN(c.max_2d, r.Int("max_2d_position_embeddings", 1024));
  TS_RETURN_IF_ERROR(Positive(r, "max_2d_position_embeddings", c.max_2d));
  c.stack = [o](const Recipe& rec) { return std::make_unique<V3Stack>(rec, o); };
  return OkStatus();
}

// A width divisible by 6 and the heads: 24 per head (96 at 4 heads), coordinate and shape
// sizes a sixth of it each.
void ScaleLayoutLmV3(const Recipe&, json& t) {
  const int64_t heads = t["num_attention_heads"].get<int64_t>();
  const int64_t hidden = heads * 24;
  t["hidden_size"] = hidden;
  t["coordinate_size"] = hidden / 6;
  t["shape_size"] = hidden / 6;
}

// The visual modules LayoutLMv3Model builds when visual_embed (the text path never calls them).
void LayoutLmV3StateDictExtra(StateDictBuilder& sd) {
  const json& cfg = sd.model().spec().tiny_config;
  if (!cfg.value("visual_embed", true)) return;
  for (const std::string& base : {std::string("layoutlmv3."), std::string()}) {
    const std::string word = base + "embeddings.word_embeddings.weight";
    if (!sd.HasWeight(word)) continue;
    const int64_t h = sd.weights().at(word)[1];
    const int64_t patch = cfg.value("patch_size", int64_t{16});
    const int64_t size = cfg.value("input_size", int64_t{224}) / patch;
    const int64_t channels = cfg.value("num_channels", int64_t{3});
    sd.AddUnused(base + "patch_embed.proj.weight", {h, channels, patch, patch});
    sd.AddUnused(base + "patch_embed.proj.bias", {h});
    sd.AddUnused(base + "cls_token", {1, 1, h});
    sd.AddUnused(base + "pos_embed", {1, size * size + 1, h});
    for (const char* n : {"LayerNorm", "norm"}) {
      sd.AddUnused(base + n + ".weight", {h});
      sd.AddUnused(base + n + ".bias", {h});
    }
    return;
  }
}

}  // namespace

EncoderFamily LayoutLmV3() {
  json example = RobertaExample("layoutlmv3", 50265, 0, 2);
  example["max_position_embeddings"] = 514;
  example["type_vocab_size"] = 1;
  example["max_2d_position_embeddings"] = 1024;
  example["coordinate_size"] = 128;
  example["shape_size"] = 128;
  example["has_relative_attention_bias"] = true;
  example["has_spatial_attention_bias"] = true;
  example["rel_pos_bins"] = 32;
  example["max_rel_pos"] = 128;
  example["rel_2d_pos_bins"] = 64;
  example["max_rel_2d_pos"] = 256;
  example["text_embed"] = true;
  example["visual_embed"] = true;
  example["input_size"] = 224;
  example["patch_size"] = 16;
  example["num_channels"] = 3;
  return {
      .model_type = "layoutlmv3",
      .defaults = {.eps = 1e-5, .pad = 1},
      .structure = {.positions = Positions::kAfterPad, .base = "layoutlmv3."},
      .names = {.seq_pooled = false,
                .seq_dense = "classifier.dense",
                .seq_act = DenseAct::kTanh,
                .seq_out = "classifier.out_proj"},
      .absolute_positions = true,
      .parse = ParseLayoutLmV3,
      .scale_extra = ScaleLayoutLmV3,
      .classes = {.base = "LayoutLMv3Model",
                  .seq_cls = "LayoutLMv3ForSequenceClassification",
                  .token_cls = "LayoutLMv3ForTokenClassification",
                  .qa = "LayoutLMv3ForQuestionAnswering"},
      .example = example,
      .state_dict = {.extra = LayoutLmV3StateDictExtra},
  };
}

TS_ZOO_ENCODER_FAMILY(LayoutLmV3);

}  // namespace ts::zoo::internal::encoder
