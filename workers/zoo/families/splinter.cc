// splinter: Splinter (modeling_splinter.py) as a family stack on the encoder trunk (encoder.h
// Stack): BERT's embeddings (word + token type + position, its own sum order) under the trunk's
// BERT layers (Stack::BertLayers), without a pooler, and for
// SplinterForQuestionAnswering the question-aware span selection head splinter_qass: the features
// at each row's first question_token_id (argmax of ids == question_token_id: position 0 when the
// row has none, as transformers takes it) through query_start_transform / query_end_transform,
// every token through start_transform / end_transform (each SplinterFullyConnectedLayer: dense,
// GELU whatever hidden_act says, LayerNorm at its default eps 1e-5), start_logits =
// start_classifier(query start) . start token reps (end alike), padded positions pushed down by
// the dtype's lowest value; the mean of the two cross entropies. SplinterForPreTraining: the same
// head over the batch's question_positions [N, 2] (two question tokens placed in each row),
// logits [N, 2, S]. The batches carry no padding (Recipe::unpadded_batches): the padded logits
// at finfo.min would swamp the output comparison. A relative position_embedding_type is refused
// naming the field. tau/splinter-base-qass.
#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::encoder {
namespace {

// Question tokens per row in SplinterForPreTraining's batches.
constexpr int64_t kQuestions = 2;

// finfo(dtype).min, float32's for float64 (the engine's golden reference runs in float64 and
// must stay comparable with the float32 runs).
double Lowest(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16:
      return static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest());
    case at::kHalf:
      return static_cast<double>(std::numeric_limits<c10::Half>::lowest());
    default:
      break;
  }
  return std::numeric_limits<float>::lowest();
}

// QuestionAwareSpanSelectionHead over [N, 1 + S, H]: row 0 the question token's features, then
// the tokens'.
class SpanSelectionHead : public TextHead {
 public:
  // `questions`: 0 for SplinterForQuestionAnswering (one question, logits [N, S]), else the
  // question_positions per row (SplinterForPreTraining, logits [N, Q, S]).
  SpanSelectionHead(TextHeadSpec spec, int64_t questions)
      : TextHead(std::move(spec)), questions_(questions) {}

  WeightShapeList Weights() const override {
    const int64_t h = spec_.hidden;
    WeightShapeList out;
    for (const char* t :
         {"query_start_transform", "query_end_transform", "start_transform", "end_transform"}) {
      const std::string p = std::string(kPrefix) + t + ".";
      out.push_back({p + "dense.weight", {h, h}});
      out.push_back({p + "dense.bias", {h}});
      out.push_back({p + "LayerNorm.weight", {h}});
      out.push_back({p + "LayerNorm.bias", {h}});
    }
    out.push_back({std::string(kPrefix) + "start_classifier.weight", {h, h}});
    out.push_back({std::string(kPrefix) + "end_classifier.weight", {h, h}});
    return out;
  }
  std::vector<std::string> OutputNames() const override { return {"start_logits", "end_logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& x,
                                  const at::Tensor& mask) const override {
    const int64_t qn = std::max<int64_t>(questions_, 1);
    const at::Tensor question = x.narrow(1, 0, qn), tokens = x.narrow(1, qn, x.size(1) - qn);
    auto logits = [&](const char* query, const char* token, const char* classifier) {
      const at::Tensor q =
          nn::Linear(Fc(w, question, query), GetWeight(w, std::string(kPrefix) + classifier));
      at::Tensor l = nn::Matmul(q, Fc(w, tokens, token).transpose(1, 2));  // [N, Q, S]
      if (questions_ == 0) l = l.squeeze(1);
      if (mask.defined()) {
        const at::Tensor pad = (1 - mask).to(l.scalar_type());
        l = l + (questions_ == 0 ? pad : pad.unsqueeze(1)) * Lowest(l.scalar_type());
      }
      return l;
    };
    return {logits("query_start_transform", "start_transform", "start_classifier.weight"),
            logits("query_end_transform", "end_transform", "end_classifier.weight")};
  }

  // QA: positions clamped to [0, S] (S ignored); pre-training: clamped to [0, S - 1] over
  // [N * Q, S] (transformers ignores pad_token_id there; the labels drawn here are never it).
  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    const int64_t s = out[0].size(-1);
    const int64_t hi = questions_ == 0 ? s : s - 1;
    const at::Tensor sp = GetInput(labels, "start_positions").clamp(0, hi).reshape({-1});
    const at::Tensor ep = GetInput(labels, "end_positions").clamp(0, hi).reshape({-1});
    return (CrossEntropy(out[0].reshape({-1, s}), sp) + CrossEntropy(out[1].reshape({-1, s}), ep)) /
           2;
  }

  // A start in the first half (past token 0, the pad id), an end up to a quarter of the
  // sequence after it, per question.
  void AddLabels(at::Generator& gen, const at::Tensor& ids, const at::Tensor&,
                 TensorMap& labels) const override {
    const int64_t b = ids.size(0), s = ids.size(1);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    const std::vector<int64_t> shape =
        questions_ == 0 ? std::vector<int64_t>{b} : std::vector<int64_t>{b, questions_};
    const at::Tensor start = at::randint(1, s / 2, shape, gen, lopts);
    labels["start_positions"] = start;
    labels["end_positions"] = start + at::randint(0, s / 4, shape, gen, lopts);
  }

 private:
  static constexpr const char* kPrefix = "splinter_qass.";
  int64_t questions_ = 0;

  // SplinterFullyConnectedLayer: LayerNorm(gelu(dense(x))), nn.LayerNorm's default eps.
  at::Tensor Fc(const WeightMap& w, const at::Tensor& x, const char* name) const {
    const std::string p = std::string(kPrefix) + name + ".";
    const at::Tensor d =
        at::gelu(nn::Linear(x, GetWeight(w, p + "dense.weight"), GetWeight(w, p + "dense.bias")));
    return nn::LayerNorm(d, GetWeight(w, p + "LayerNorm.weight"),
                         GetWeight(w, p + "LayerNorm.bias"), 1e-5);
  }
};

class SplinterStack : public Stack {
 public:
  SplinterStack(const Recipe& r, int64_t question_id) : r_(r), question_id_(question_id) {}

  void AddWeights(const std::string& p, const AddFn& add) override {
    const int64_t h = r_.hidden;
    word_ = add(p + "embeddings.word_embeddings.weight", {r_.vocab, h});
    pos_ = add(p + "embeddings.position_embeddings.weight", {r_.max_pos, h});
    type_ = add(p + "embeddings.token_type_embeddings.weight", {r_.type_vocab, h});
    emb_norm_ = p + "embeddings.LayerNorm";
    add(emb_norm_ + ".weight", {h});
    add(emb_norm_ + ".bias", {h});
  }

  std::string WordEmbedding() const override { return word_; }
  bool BertLayers() const override { return true; }

  Embedded Embed(const WeightMap& w, const at::Tensor& ids, const at::Tensor&,
                 const at::Tensor& types, const TensorMap&) const override {
    const at::Tensor ty = types.defined() ? types : at::zeros_like(ids);
    const at::Tensor x = nn::Embedding(GetWeight(w, word_), ids, r_.pad.value_or(-1)) +
                         nn::Embedding(GetWeight(w, type_), ty) +
                         nn::Embedding(GetWeight(w, pos_), at::arange(ids.size(1), ids.options()));
    return {nn::LayerNorm(x, GetWeight(w, emb_norm_ + ".weight"), GetWeight(w, emb_norm_ + ".bias"),
                          r_.eps),
            at::Tensor()};
  }

  // The question tokens' features ahead of the tokens': inputs' question_positions [N, Q]
  // (SplinterForPreTraining), else the first question token of each row.
  at::Tensor HeadInput(const WeightMap&, bool, bool base, const at::Tensor& ids,
                       const TensorMap& inputs, const at::Tensor& h,
                       const at::Tensor&) const override {
    if (base) return h;
    at::Tensor pos = GetOptionalInput(inputs, "question_positions");
    if (!pos.defined()) pos = ids.eq(question_id_).to(at::kInt).argmax(-1).unsqueeze(1);
    const at::Tensor index = pos.unsqueeze(-1).expand({h.size(0), pos.size(1), h.size(2)});
    return at::cat({at::gather(h, 1, index), h}, 1);
  }

  // SplinterForPreTraining's batches: kQuestions question tokens per row at distinct positions
  // past token 0 (the recurring spans' replacements), their positions as question_positions.
  void AddInputs(Head kind, at::Generator& gen, at::Tensor& ids, const at::Tensor& mask,
                 TensorMap& inputs) const override {
    if (kind != Head::kPreTraining) return;
    const int64_t n = ids.size(0), s = ids.size(1);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    ids = ids.masked_fill(ids.eq(question_id_), (question_id_ + 1) % r_.vocab);
    // Positions 1 .. s / 2 - 1 and s / 2 .. s - 1 halves, one question in each (attended: the
    // family's batches carry no padding).
    const at::Tensor first = at::randint(1, s / 2, {n, 1}, gen, lopts);
    const at::Tensor second = at::randint(s / 2, s, {n, 1}, gen, lopts);
    const at::Tensor pos = at::cat({first, second}, 1);
    ids.scatter_(1, pos, question_id_);
    inputs["question_positions"] = pos;
    (void)mask;
  }

  std::unique_ptr<TextHead> FamilyHead(Head kind, const TextHeadSpec& spec) const override {
    if (kind == Head::kQA) return std::make_unique<SpanSelectionHead>(spec, 0);
    if (kind == Head::kPreTraining) return std::make_unique<SpanSelectionHead>(spec, kQuestions);
    return nullptr;
  }

 private:
  Recipe r_;
  int64_t question_id_ = 104;
  std::string word_, pos_, type_, emb_norm_;
};

Status ParseSplinter(const ConfigReader& r, const json&, Recipe& c) {
  TS_ASSIGN_OR_RETURN(int64_t question_id, r.Int("question_token_id", 104));
  c.unpadded_batches = true;
  c.stack = [question_id](const Recipe& rec) {
    return std::make_unique<SplinterStack>(rec, question_id);
  };
  return OkStatus();
}

// The question token kept inside the tiny vocabulary (its last id, as the other token ids).
void ScaleSplinter(const Recipe& real, json& t) {
  MapTokenId(t, "question_token_id", std::min(real.vocab, TinyProfile::kVocab));
}

}  // namespace

EncoderFamily Splinter() {
  json example = BertExample();
  example["model_type"] = "splinter";
  example["vocab_size"] = 30522;
  example["question_token_id"] = 104;
  return {
      .model_type = "splinter",
      .structure = {.base = "splinter."},
      .absolute_positions = true,
      .parse = ParseSplinter,
      .scale_extra = ScaleSplinter,
      .classes = {.base = "SplinterModel",
                  .qa = "SplinterForQuestionAnswering",
                  .pretraining = "SplinterForPreTraining"},
      .example = example,
  };
}

TS_ZOO_ENCODER_FAMILY(Splinter);

}  // namespace ts::zoo::internal::encoder
