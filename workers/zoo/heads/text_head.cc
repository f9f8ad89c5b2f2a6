#include "workers/zoo/heads/text_head.h"

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {

const char* TextHeadTask(TextHeadKind kind) {
  switch (kind) {
    case TextHeadKind::kCausalLM:
      return "text-generation";
    case TextHeadKind::kSequenceClassification:
      return "text-classification";
    case TextHeadKind::kTokenClassification:
      return "token-classification";
    case TextHeadKind::kQuestionAnswering:
      return "question-answering";
    case TextHeadKind::kMaskedLM:
      return "fill-mask";
    case TextHeadKind::kMultipleChoice:
      return "multiple-choice";
    case TextHeadKind::kBase:
      break;
  }
  return "feature-extraction";
}

at::Tensor TextHead::Project(const WeightMap& w, const at::Tensor& hidden) const {
  const std::string weight = spec_.tied_weight.empty() ? WeightName() : spec_.tied_weight;
  if (!spec_.lm_extra.empty()) {  // MobileBERT: [E | H - E] input columns
    const at::Tensor full =
        at::cat({GetWeight(w, weight), GetWeight(w, spec_.lm_extra + ".weight").t()}, 1);
    return nn::Linear(hidden, full, GetOptionalWeight(w, BiasName()));
  }
  return nn::Linear(hidden, GetWeight(w, weight), GetOptionalWeight(w, BiasName()));
}

WeightShapeList TextHead::LinearWeights(int64_t rows) const {
  WeightShapeList out;
  // An untied LM decoder after a transform reads the transform's width (rembert).
  int64_t cols = spec_.transform.empty() ? spec_.hidden : spec_.transform_width;
  if (!spec_.dense.empty() && spec_.dense_width > 0) cols = spec_.dense_width;
  if (spec_.tied_weight.empty()) out.emplace_back(WeightName(), std::vector<int64_t>{rows, cols});
  if (spec_.bias) out.emplace_back(BiasName(), std::vector<int64_t>{rows});
  return out;
}

WeightShapeList TextHead::FirstTokenWeights() const {
  WeightShapeList out;
  const int64_t h = spec_.hidden;
  for (const std::string& name : {spec_.pooler, spec_.dense}) {
    if (name.empty()) continue;
    const int64_t rows = name == spec_.dense && spec_.dense_width > 0 ? spec_.dense_width : h;
    out.emplace_back(name + ".weight", std::vector<int64_t>{rows, h});
    out.emplace_back(name + ".bias", std::vector<int64_t>{rows});
  }
  return out;
}

at::Tensor TextHead::FirstTokenFeatures(const WeightMap& w, const at::Tensor& hidden) const {
  at::Tensor first = hidden.select(1, spec_.last_token ? hidden.size(1) - 1 : 0);
  if (!spec_.pooler.empty()) {
    return at::tanh(nn::Linear(first, GetWeight(w, spec_.pooler + ".weight"),
                               GetWeight(w, spec_.pooler + ".bias")));
  }
  if (spec_.dense.empty()) return first;
  at::Tensor d =
      nn::Linear(first, GetWeight(w, spec_.dense + ".weight"), GetWeight(w, spec_.dense + ".bias"));
  if (spec_.dense_linear) return d;
  return spec_.dense_act ? nn::Activate(d, *spec_.dense_act) : at::tanh(d);
}

WeightShapeList TextHead::TransformWeights() const {
  WeightShapeList out;
  if (spec_.transform.empty()) return out;
  const int64_t t = spec_.transform_width;
  out.emplace_back(spec_.transform + ".weight", std::vector<int64_t>{t, spec_.hidden});
  out.emplace_back(spec_.transform + ".bias", std::vector<int64_t>{t});
  out.emplace_back(spec_.transform_norm + ".weight", std::vector<int64_t>{t});
  out.emplace_back(spec_.transform_norm + ".bias", std::vector<int64_t>{t});
  return out;
}

at::Tensor TextHead::Transform(const WeightMap& w, const at::Tensor& hidden) const {
  if (spec_.transform.empty()) return hidden;
  at::Tensor t = nn::Activate(nn::Linear(hidden, GetWeight(w, spec_.transform + ".weight"),
                                         GetWeight(w, spec_.transform + ".bias")),
                              spec_.transform_act);
  return nn::LayerNorm(t, GetWeight(w, spec_.transform_norm + ".weight"),
                       GetWeight(w, spec_.transform_norm + ".bias"), spec_.norm_eps);
}

at::Tensor PerTokenCrossEntropy(const at::Tensor& logits, const at::Tensor& labels) {
  return CrossEntropy(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}));
}

std::unique_ptr<TextHead> MakeTextHead(TextHeadSpec spec) {
  switch (spec.kind) {
    case TextHeadKind::kCausalLM:
      return MakeCausalLmHead(std::move(spec));
    case TextHeadKind::kSequenceClassification:
      return MakeSequenceClassificationHead(std::move(spec));
    case TextHeadKind::kTokenClassification:
      return MakeTokenClassificationHead(std::move(spec));
    case TextHeadKind::kQuestionAnswering:
      return MakeQuestionAnsweringHead(std::move(spec));
    case TextHeadKind::kMaskedLM:
      return MakeMaskedLmHead(std::move(spec));
    case TextHeadKind::kMultipleChoice:
      return MakeMultipleChoiceHead(std::move(spec));
    case TextHeadKind::kBase:
      break;
  }
  return MakeBaseModelHead(std::move(spec));
}

}  // namespace ts::zoo::internal
