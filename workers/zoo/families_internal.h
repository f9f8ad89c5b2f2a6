// Family builders behind BuildModel (model.cc), and helpers shared by the families.
// Private to the zoo.
#pragma once

#include <memory>
#include <string>

#include "workers/zoo/model.h"

namespace ts::zoo::internal {

enum class BertHead { kBase, kSequenceClassification, kMaskedLM };

// Each builds from spec.tiny_config (the config that is actually built).
StatusOr<std::unique_ptr<Model>> BuildDecoder(ModelSpec spec, bool sequence_classification);
StatusOr<std::unique_ptr<Model>> BuildBert(ModelSpec spec, BertHead head);
StatusOr<std::unique_ptr<Model>> BuildVit(ModelSpec spec);

// The weight `name`; throws c10::Error naming it when absent.
const at::Tensor& GetWeight(const WeightMap& weights, const std::string& name);
// The weight `name`, or an undefined tensor when `name` is empty.
at::Tensor GetOptionalWeight(const WeightMap& weights, const std::string& name);
// The input `name`, or an undefined tensor when absent.
at::Tensor GetOptionalInput(const TensorMap& inputs, const std::string& name);
// The input `name`; throws c10::Error naming it when absent.
const at::Tensor& GetInput(const TensorMap& inputs, const std::string& name);

// HF cross entropy: logits [N, C], labels [N] int64, ignore_index -100, mean.
at::Tensor CrossEntropy(const at::Tensor& logits, const at::Tensor& labels);

// Right padding used by every text batch: row 1 (if any) has its last seq_len / 4 tokens padded.
at::Tensor MakeAttentionMask(int64_t batch_size, int64_t seq_len);

}  // namespace ts::zoo::internal
