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
    case TextHeadKind::kBase:
      break;
  }
  return "feature-extraction";
}

at::Tensor TextHead::Project(const WeightMap& w, const at::Tensor& hidden) const {
  const std::string weight = spec_.tied_weight.empty() ? WeightName() : spec_.tied_weight;
  return nn::Linear(hidden, GetWeight(w, weight), GetOptionalWeight(w, BiasName()));
}

WeightShapeList TextHead::LinearWeights(int64_t rows) const {
  WeightShapeList out;
  if (spec_.tied_weight.empty())
    out.emplace_back(WeightName(), std::vector<int64_t>{rows, spec_.hidden});
  if (spec_.bias) out.emplace_back(BiasName(), std::vector<int64_t>{rows});
  return out;
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
    case TextHeadKind::kBase:
      break;
  }
  return MakeBaseModelHead(std::move(spec));
}

}  // namespace ts::zoo::internal
