// Task heads over a text trunk's final hidden states [B, S, H]: their weights, output names,
// loss and labels (README.md "Heads"). A trunk (decoder today, encoder later) builds one head
// from a TextHeadSpec whose weight names come from its recipe, appends the head's weights after
// its own, and hands it the hidden states. Private to the zoo.
//
// Thread-safety: a head is immutable after MakeTextHead; every method is const.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/model.h"

namespace ts::zoo::internal {

enum class TextHeadKind {
  kCausalLM,
  kSequenceClassification,  // pools the last attended token
  kTokenClassification,
  kQuestionAnswering,
  kBase,  // no head: last_hidden_state, regressed onto a random target
};

// The transformers pipeline tag a head serves ("text-generation", ...).
const char* TextHeadTask(TextHeadKind kind);

using WeightShapeList = std::vector<std::pair<std::string, std::vector<int64_t>>>;

struct TextHeadSpec {
  TextHeadKind kind = TextHeadKind::kCausalLM;
  int64_t hidden = 0, vocab = 0, num_labels = 2;
  // HF state_dict prefix of the head's Linear ("lm_head", "score", "classifier", "qa_outputs");
  // its weight is `name + ".weight"`, its bias `name + ".bias"` when `bias`.
  std::string name;
  bool bias = false;
  // Causal LM: the embedding's weight name when the head is tied to it (no weight of its own).
  std::string tied_weight;
  double logit_mult = 1.0;     // causal LM: logits * logit_mult (granite, cohere)
  double final_softcap = 0.0;  // causal LM and sequence classification: cap * tanh(x / cap)
  // Sequence classification: cast the mask before the positions' arange (the recipe decoder
  // families' op order; the llama-style lineage casts after).
  bool cast_mask_first = false;
};

class TextHead {
 public:
  explicit TextHead(TextHeadSpec spec) : spec_(std::move(spec)) {}
  virtual ~TextHead() = default;
  const TextHeadSpec& spec() const { return spec_; }

  // The head's own weights, in state_dict order (appended after the trunk's).
  virtual WeightShapeList Weights() const = 0;
  virtual std::vector<std::string> OutputNames() const = 0;
  // Outputs from the final hidden states; `mask` is the attention mask (may be undefined).
  virtual std::vector<at::Tensor> Forward(const WeightMap& w, const at::Tensor& hidden,
                                          const at::Tensor& mask) const = 0;
  // HF loss of Forward's outputs against the batch labels.
  virtual at::Tensor Loss(const std::vector<at::Tensor>& outputs,
                          const TensorMap& labels) const = 0;
  // Draws the labels from `gen` (after the trunk drew the inputs ids [B, S] and mask [B, S]).
  virtual void AddLabels(at::Generator& gen, const at::Tensor& ids, const at::Tensor& mask,
                         TensorMap& labels) const = 0;

 protected:
  // The Linear every head but the base model applies: hidden @ weight^T (+ bias).
  at::Tensor Project(const WeightMap& w, const at::Tensor& hidden) const;
  std::string WeightName() const { return spec_.name + ".weight"; }
  std::string BiasName() const { return spec_.bias ? spec_.name + ".bias" : ""; }
  // name.weight [rows, hidden] and, with a bias, name.bias [rows].
  WeightShapeList LinearWeights(int64_t rows) const;

  TextHeadSpec spec_;
};

std::unique_ptr<TextHead> MakeTextHead(TextHeadSpec spec);

// One head per file (heads/<head>.cc).
std::unique_ptr<TextHead> MakeCausalLmHead(TextHeadSpec spec);
std::unique_ptr<TextHead> MakeSequenceClassificationHead(TextHeadSpec spec);
std::unique_ptr<TextHead> MakeTokenClassificationHead(TextHeadSpec spec);
std::unique_ptr<TextHead> MakeQuestionAnsweringHead(TextHeadSpec spec);
std::unique_ptr<TextHead> MakeBaseModelHead(TextHeadSpec spec);

}  // namespace ts::zoo::internal
