// An encoder family as data (README.md "Encoder trunk"): the config field names of its sizes,
// its config-class defaults, the recipe structure and HF head names of its layout, the parse
// steps that read its own fields, its tiny-scaling extras, its example configs and its head
// classes. Each families/<model_type>.cc defines one EncoderFamily and registers it with
// TS_ZOO_ENCODER_FAMILY, which turns its head classes into registry entries. Private to the zoo.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/trunks/encoder.h"

namespace ts::zoo::internal::encoder {

using json = nlohmann::json;

// Config field names of the structural sizes and activation (DistilBERT: dim, n_layers, ...).
struct Fields {
  std::string hidden = "hidden_size", layers = "num_hidden_layers", heads = "num_attention_heads",
              inter = "intermediate_size", act = "hidden_act";
  // DistilBERT: the sizes may also be given under the standard names (attribute_map), the
  // intermediate size defaults to 3072 and there is no layer_norm_eps field.
  bool distil = false;
  // "" for `heads`: the family has no attention heads (FNet); "" for `inter`: the FFN is four
  // times the hidden size (XLM's TransformerFFN).
};

// The family's config-class defaults.
struct Defaults {
  int64_t type_vocab = 2;  // < 0: no token types (distilbert, bert-generation); 0: may be 0
  std::string act = "gelu";
  double eps = 1e-12;
  int64_t pad = 0;
  // embedding_size: 0 = no such field (E = H); -1 = the field, defaulting to the hidden size;
  // > 0 = the field's default.
  int64_t embedding = 0;
};

// Class names of the heads transformers has for the family ("" = none).
struct HeadClasses {
  std::string base = "", seq_cls = "", token_cls = "", qa = "", masked_lm = "",
              multiple_choice = "", causal_lm = "", next_sentence = "", pretraining = "",
              dpr_encoder = "";
};

// `prefix` + Model, ForSequenceClassification, ForTokenClassification, ForQuestionAnswering
// (when `qa`), ForMaskedLM, ForMultipleChoice, ForCausalLM (when `causal`) and
// ForNextSentencePrediction (when `nsp`) and ForPreTraining (when `pretraining`).
HeadClasses AllHeads(const std::string& prefix, bool causal, bool nsp = false, bool qa = true,
                     bool pretraining = false);

using ParseFn = std::function<Status(const ConfigReader& r, const json& config, Recipe& c)>;
// Family fields of the tiny config, after the common scaling wrote the tiny sizes.
using ScaleFn = std::function<void(const Recipe& real, json& tiny)>;

struct EncoderFamily {
  std::string model_type = "";
  Fields fields = {};
  Defaults defaults = {};
  // Layout, positions, projection, norms, base prefix (the sizes are parsed).
  Recipe structure = {};
  HeadNames names = {};
  // Checks position_embedding_type is "absolute" (the BERT and RoBERTa lineages, ELECTRA).
  bool absolute_positions = false;
  // The family's fields read after position_embedding_type, and after embedding_size.
  ParseFn parse = nullptr;
  ParseFn parse_late = nullptr;
  ScaleFn scale_extra = nullptr;
  HeadClasses classes = {};
  // The pipeline task of the QA class when it is not "question-answering" (LayoutLM's is
  // "document-question-answering").
  std::string qa_task = "";
  json example = nullptr;     // modelled on a public checkpoint (named in the family file)
  json lm_example = nullptr;  // the masked / causal LM classes' example when it differs
  // BERT's first classes (BertModel, BertForSequenceClassification, BertForMaskedLM): configs
  // read by config.cc's ParseBertConfig through `bert_recipe` and scaled by ScaleToTiny(c,
  // "bert"); the kBert lineage.
  HeadClasses bert_classes = {};
  std::function<StatusOr<Recipe>(const json& config)> bert_recipe = nullptr;
  // What the classes' transformers state_dict holds beyond their weights (tied projections
  // under the family's own names, modules built but never called).
  StateDictRules state_dict = {};
};

// The recipe of `config`: sizes and common fields, then the family's own.
StatusOr<Recipe> ParseRecipe(const EncoderFamily& fam, const json& config);
// The README tiny policy (width, depth, vocab, positions, labels), then the family's extras.
StatusOr<json> Scale(const EncoderFamily& fam, const json& config);

// "must be positive (got 0)".
Status Positive(const ConfigReader& r, const std::string& f, int64_t v);

// The registry entries of `family`'s head classes.
std::vector<ArchEntry> Archs(EncoderFamily family);

}  // namespace ts::zoo::internal::encoder

// In a family file, inside namespace ts::zoo::internal::encoder: registers the family that
// `fn()` returns (families_internal.h TS_ZOO_REGISTER_FAMILY).
#define TS_ZOO_ENCODER_FAMILY(fn) \
  TS_ZOO_REGISTER_FAMILY(fn, [] { return ::ts::zoo::internal::encoder::Archs(fn()); })
