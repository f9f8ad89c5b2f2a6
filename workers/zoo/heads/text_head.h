// Task heads over a text trunk's final hidden states [B, S, H]: their weights, output names,
// loss and labels (README.md "Heads"). A trunk (decoder or encoder) builds one head
// from a TextHeadSpec whose weight names come from its recipe, appends the head's weights after
// its own, and hands it the hidden states. Private to the zoo.
//
// Thread-safety: a head is immutable after MakeTextHead; every method is const.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/model.h"

namespace ts::zoo::internal {

enum class TextHeadKind {
  kCausalLM,
  kSequenceClassification,  // pools the last attended token
  kTokenClassification,
  kQuestionAnswering,
  kBase,  // no head: last_hidden_state, regressed onto a random target
  kMaskedLM,        // logits [B, S, V] (encoders), cross entropy over the labelled positions
  kMultipleChoice,  // one score per choice row (encoders; the trunk folds [B, C] rows)
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
  // Causal LM: cap * tanh(x / cap) (gemma2 final_logit_softcapping; transformers caps only
  // Gemma2ForCausalLM's logits, never the classifiers').
  double final_softcap = 0.0;
  // Sequence classification: cast the mask before the positions' arange (the recipe decoder
  // families' op order; the llama-style lineage casts after).
  bool cast_mask_first = false;

  // Encoders. Sequence classification and multiple choice classify token 0's features
  // (`first_token`): the base model's tanh pooler when `pooler` is set (its weights are the
  // head's first: "bert.pooler.dense"), else a dense layer over token 0 when `dense` is set
  // (`dense_act`; nullopt: tanh), else token 0 itself. The base model adds pooler_output when
  // `pooler` is set.
  bool first_token = false;
  // ... reading the last position instead of token 0 (RoFormerSequenceSummary, summary_type
  // "last": hidden_states[:, -1], padding or not).
  bool last_token = false;
  std::string pooler = "", dense = "";
  std::optional<Activation> dense_act = std::nullopt;
  // The dense layer's width when it is not the hidden size, and no activation after it
  // (`dense_linear`): XLMSequenceSummary projects token 0 to num_labels, and
  // XLMForMultipleChoice's logits_proj reads that width.
  int64_t dense_width = 0;
  bool dense_linear = false;
  // Base model: its one output is pooler_output, token 0's features as above (DPR's encoders
  // return no last_hidden_state).
  bool pooled_only = false;
  // Masked / causal LM: a transform before the vocabulary projection when `transform` is set:
  // Linear `transform` [transform_width, hidden], `transform_act`, LayerNorm `transform_norm`.
  std::string transform = "", transform_norm = "";
  int64_t transform_width = 0;
  Activation transform_act = Activation::kGeluErf;
  double norm_eps = 1e-12;
  // Masked LM with a tied decoder narrower than the transform (MobileBERT): `lm_extra`.weight
  // [transform_width - tied width, vocab] supplies the remaining input columns, the decoder
  // weight being cat(tied, lm_extra.weight^T) along the inputs.
  std::string lm_extra = "";
  int64_t lm_extra_rows = 0;
  // Question answering: BigBirdForQuestionAnsweringHead's block before `name` when set
  // (`qa_block`.intermediate.dense [qa_inter, hidden] + qa_act, `qa_block`.output.dense and
  // LayerNorm over it plus the hidden states), and the first start position its labels draw
  // (past the question tokens the model masks).
  std::string qa_block = "";
  int64_t qa_inter = 0;
  Activation qa_act = Activation::kGeluErf;
  int64_t qa_min_start = 0;
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
  // The pooler's and the dense layer's weights (first_token heads), in state_dict order.
  WeightShapeList FirstTokenWeights() const;
  // Token 0's features: the pooler, else the dense layer, else token 0 (see TextHeadSpec).
  at::Tensor FirstTokenFeatures(const WeightMap& w, const at::Tensor& hidden) const;
  // The LM transform's weights and forward (identity when the spec has none).
  WeightShapeList TransformWeights() const;
  at::Tensor Transform(const WeightMap& w, const at::Tensor& hidden) const;

  TextHeadSpec spec_;
};

std::unique_ptr<TextHead> MakeTextHead(TextHeadSpec spec);

// Cross entropy of per-token logits [B, S, C] against labels [B, S] (-100 ignored).
at::Tensor PerTokenCrossEntropy(const at::Tensor& logits, const at::Tensor& labels);

// One head per file (heads/<head>.cc).
std::unique_ptr<TextHead> MakeCausalLmHead(TextHeadSpec spec);
std::unique_ptr<TextHead> MakeSequenceClassificationHead(TextHeadSpec spec);
std::unique_ptr<TextHead> MakeTokenClassificationHead(TextHeadSpec spec);
std::unique_ptr<TextHead> MakeQuestionAnsweringHead(TextHeadSpec spec);
std::unique_ptr<TextHead> MakeBaseModelHead(TextHeadSpec spec);
std::unique_ptr<TextHead> MakeMaskedLmHead(TextHeadSpec spec);  // heads/causal_lm.cc
std::unique_ptr<TextHead> MakeMultipleChoiceHead(TextHeadSpec spec);
// heads/pretraining.cc: *ForPreTraining, the masked-LM head `lm` and the sentence-pair
// classifier `pair` (a first-token sequence-classification spec) on the same hidden states.
struct PairNames {
  std::string output = "seq_relationship_logits";  // ALBERT: sop_logits
  std::string label = "next_sentence_label";       // ALBERT: sentence_order_label
};
std::unique_ptr<TextHead> MakePreTrainingHead(TextHeadSpec lm, TextHeadSpec pair,
                                              PairNames names);
// heads/pretraining.cc: ElectraForPreTraining's discriminator (`spec.name` its module,
// `spec.dense_act` its activation): logits [B, S].
std::unique_ptr<TextHead> MakeDiscriminatorHead(TextHeadSpec spec);

}  // namespace ts::zoo::internal
