#include "workers/zoo/trunks/encoder_family.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "workers/zoo/heads/text_head.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::encoder {
namespace {

// Reads `name`, or its transformers attribute_map alias when only that is present.
StatusOr<int64_t> IntAlias(const ConfigReader& r, const std::string& name,
                           const std::string& alias) {
  if (!r.Has(name) && r.Has(alias)) return r.Int(alias);
  return r.Int(name);
}

Status ReadSizes(const ConfigReader& r, const Fields& f, Recipe& c) {
  TS_ASSIGN_OR_RETURN(c.vocab, r.Int("vocab_size"));
  TS_RETURN_IF_ERROR(Positive(r, "vocab_size", c.vocab));
  if (f.distil) {
    TS_ASSIGN_OR_RETURN(c.hidden, IntAlias(r, f.hidden, "hidden_size"));
    TS_ASSIGN_OR_RETURN(c.layers, IntAlias(r, f.layers, "num_hidden_layers"));
    TS_ASSIGN_OR_RETURN(c.heads, IntAlias(r, f.heads, "num_attention_heads"));
    TS_ASSIGN_OR_RETURN(c.inter, r.Int(f.inter, 3072));  // DistilBertConfig default
  } else {
    TS_ASSIGN_OR_RETURN(c.hidden, r.Int(f.hidden));
    TS_ASSIGN_OR_RETURN(c.layers, r.Int(f.layers));
    c.heads = 1;
    if (!f.heads.empty()) {
      TS_ASSIGN_OR_RETURN(c.heads, r.Int(f.heads));
    }
    c.inter = 4 * c.hidden;
    if (!f.inter.empty()) {
      TS_ASSIGN_OR_RETURN(c.inter, r.Int(f.inter));
    }
  }
  TS_RETURN_IF_ERROR(Positive(r, f.hidden, c.hidden));
  TS_RETURN_IF_ERROR(Positive(r, f.layers, c.layers));
  if (!f.heads.empty()) TS_RETURN_IF_ERROR(Positive(r, f.heads, c.heads));
  if (!f.inter.empty()) TS_RETURN_IF_ERROR(Positive(r, f.inter, c.inter));
  if (c.hidden % c.heads != 0) {
    return r.Error(f.heads, "must divide " + f.hidden + " (" + std::to_string(c.hidden) + " % " +
                                std::to_string(c.heads) + " != 0)");
  }
  TS_ASSIGN_OR_RETURN(c.max_pos, r.Int("max_position_embeddings", 512));
  return Positive(r, "max_position_embeddings", c.max_pos);
}

// Token types, activation, norm epsilon, init range, pad id, position type.
Status ReadCommon(const ConfigReader& r, const EncoderFamily& fam, Recipe& c) {
  const Defaults& d = fam.defaults;
  c.type_vocab = 0;
  if (d.type_vocab >= 0) {
    TS_ASSIGN_OR_RETURN(c.type_vocab, r.Int("type_vocab_size", d.type_vocab));
    if (c.type_vocab < 0 || (c.type_vocab == 0 && d.type_vocab != 0)) {
      return r.Error("type_vocab_size",
                     "must be positive (got " + std::to_string(c.type_vocab) + ")");
    }
  }
  TS_ASSIGN_OR_RETURN(std::string act, r.String(fam.fields.act, d.act));
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(act, r.Name(fam.fields.act)));
  if (!fam.fields.distil) {
    TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_eps", d.eps));
    if (!(c.eps > 0.0) || !std::isfinite(c.eps))
      return r.Error("layer_norm_eps", "must be positive");
  }
  TS_ASSIGN_OR_RETURN(c.init_range, r.Double("initializer_range", 0.02));
  if (r.Has("pad_token_id")) {
    TS_ASSIGN_OR_RETURN(int64_t p, r.Int("pad_token_id"));
    c.pad = p;
  } else if (!r.IsNull("pad_token_id")) {
    c.pad = d.pad;
  }
  if (c.pad && (*c.pad < 0 || *c.pad >= c.vocab)) c.pad.reset();
  if (c.positions == Positions::kAfterPad && !c.pad)
    return r.Error("pad_token_id", "required (position ids)");
  if (fam.absolute_positions) {
    TS_ASSIGN_OR_RETURN(std::string pt, r.String("position_embedding_type", "absolute"));
    if (pt != "absolute") return r.Error("position_embedding_type", "unsupported '" + pt + "'");
  }
  return OkStatus();
}

const char* TaskOf(Head head) {
  switch (head) {
    case Head::kSeqCls:
      return "text-classification";
    case Head::kTokenCls:
      return "token-classification";
    case Head::kQA:
      return "question-answering";
    case Head::kMaskedLM:
      return "fill-mask";
    case Head::kMultipleChoice:
      return "multiple-choice";
    case Head::kCausalLM:
      return "text-generation";
    case Head::kNextSentence:
      return "next-sentence-prediction";
    case Head::kPreTraining:
      return "pretraining";
    case Head::kBase:
    case Head::kDprEncoder:
      break;
  }
  return "feature-extraction";
}

std::vector<std::pair<Head, std::string>> Classes(const HeadClasses& c) {
  std::vector<std::pair<Head, std::string>> out;
  for (const auto& [head, arch] :
       std::vector<std::pair<Head, std::string>>{{Head::kBase, c.base},
                                                 {Head::kSeqCls, c.seq_cls},
                                                 {Head::kTokenCls, c.token_cls},
                                                 {Head::kQA, c.qa},
                                                 {Head::kMaskedLM, c.masked_lm},
                                                 {Head::kMultipleChoice, c.multiple_choice},
                                                 {Head::kCausalLM, c.causal_lm},
                                                 {Head::kNextSentence, c.next_sentence},
                                                 {Head::kPreTraining, c.pretraining},
                                                 {Head::kDprEncoder, c.dpr_encoder}}) {
    if (!arch.empty()) out.emplace_back(head, arch);
  }
  return out;
}

using FamilyPtr = std::shared_ptr<const EncoderFamily>;

ArchEntry Entry(const FamilyPtr& fam, const std::string& arch, Head head) {
  // The masked / causal LM classes (and the MLM part of *ForPreTraining, not ELECTRA's
  // discriminator) use the family's LM example when it has one.
  const bool lm = head == Head::kMaskedLM || head == Head::kCausalLM ||
                  (head == Head::kPreTraining && !fam->names.pretraining_discriminator);
  ArchEntry e;
  e.info = {arch, fam->model_type,
            head == Head::kQA && !fam->qa_task.empty() ? fam->qa_task : TaskOf(head)};
  e.example_config =
      WithArchitecture(lm && !fam->lm_example.is_null() ? fam->lm_example : fam->example, arch);
  // A causal-LM checkpoint of an encoder family is saved with is_decoder (HF warns otherwise).
  if (head == Head::kCausalLM) e.example_config["is_decoder"] = true;
  e.scale = [fam](const json& c) { return Scale(*fam, c); };
  e.build = [fam, head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(Recipe r, ParseRecipe(*fam, spec.tiny_config));
    return BuildEncoderModel(std::move(spec), std::move(r), fam->names, head);
  };
  e.state_dict = fam->state_dict;
  return e;
}

// BERT's first classes: config.cc's parser, scaling.cc's policy, the kBert lineage.
ArchEntry BertEntry(const FamilyPtr& fam, const std::string& arch, Head head) {
  ArchEntry e;
  e.info = {arch, fam->model_type, TaskOf(head)};
  e.example_config = WithArchitecture(fam->example, arch);
  e.scale = [](const json& c) { return ScaleToTiny(c, "bert"); };
  e.build = [fam, head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(Recipe r, fam->bert_recipe(spec.tiny_config));
    return BuildEncoderModel(std::move(spec), std::move(r), fam->names, head);
  };
  e.state_dict = fam->state_dict;
  return e;
}

}  // namespace

Status Positive(const ConfigReader& r, const std::string& f, int64_t v) {
  if (v <= 0) return r.Error(f, "must be positive (got " + std::to_string(v) + ")");
  return OkStatus();
}

HeadClasses AllHeads(const std::string& prefix, bool causal, bool nsp, bool qa,
                     bool pretraining) {
  return {.base = prefix + "Model",
          .seq_cls = prefix + "ForSequenceClassification",
          .token_cls = prefix + "ForTokenClassification",
          .qa = qa ? prefix + "ForQuestionAnswering" : "",
          .masked_lm = prefix + "ForMaskedLM",
          .multiple_choice = prefix + "ForMultipleChoice",
          .causal_lm = causal ? prefix + "ForCausalLM" : "",
          .next_sentence = nsp ? prefix + "ForNextSentencePrediction" : "",
          .pretraining = pretraining ? prefix + "ForPreTraining" : ""};
}

StatusOr<Recipe> ParseRecipe(const EncoderFamily& fam, const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  Recipe c = fam.structure;
  TS_RETURN_IF_ERROR(ReadSizes(r, fam.fields, c));
  TS_RETURN_IF_ERROR(ReadCommon(r, fam, c));
  if (fam.parse) TS_RETURN_IF_ERROR(fam.parse(r, config, c));
  TS_ASSIGN_OR_RETURN(c.decoder, r.Bool("is_decoder", false));
  c.embedding = c.hidden;
  if (fam.defaults.embedding != 0) {
    const int64_t def = fam.defaults.embedding < 0 ? c.hidden : fam.defaults.embedding;
    TS_ASSIGN_OR_RETURN(c.embedding, r.Int("embedding_size", def));
    TS_RETURN_IF_ERROR(Positive(r, "embedding_size", c.embedding));
  }
  if (fam.parse_late) TS_RETURN_IF_ERROR(fam.parse_late(r, config, c));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> Scale(const EncoderFamily& fam, const json& config) {
  using P = TinyProfile;
  TS_ASSIGN_OR_RETURN(Recipe c, ParseRecipe(fam, config));
  json t = config;
  const Fields& f = fam.fields;
  // A family without heads (FNet) takes the tiny width of the full head count.
  const int64_t heads = f.heads.empty() ? P::kHeads : std::min(c.heads, P::kHeads);
  const int64_t hidden = heads * (P::kHidden / P::kHeads);
  // ALBERT reuses one shared layer across its depth: two passes keep that reuse (and the
  // gradient accumulation into the shared weights) in the tiny model.
  const int64_t layers = TinyDepth(c.layers, c.layout == Layout::kAlbert);
  if (f.distil) {
    for (const char* a : {"hidden_size", "num_attention_heads", "num_hidden_layers"}) t.erase(a);
  }
  t[f.hidden] = hidden;
  if (!f.heads.empty()) t[f.heads] = heads;
  t[f.layers] = layers;
  if (!f.inter.empty()) t[f.inter] = ScaleRatio(c.inter, c.hidden, hidden, 8);
  if (fam.defaults.embedding > 0 || (fam.defaults.embedding < 0 && t.contains("embedding_size"))) {
    t["embedding_size"] =
        c.embedding == c.hidden ? hidden : ScaleRatio(c.embedding, c.hidden, hidden, 8);
  }
  if (fam.scale_extra) fam.scale_extra(c, t);
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t["vocab_size"] = vocab;
  for (const char* id :
       {"pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id"})
    MapTokenId(t, id, vocab);
  t["max_position_embeddings"] = std::min(c.max_pos, P::kMaxPositions);
  ScaleLabels(t, c.num_labels);
  // Sequence length from the tiny config itself (pad may have moved).
  TS_ASSIGN_OR_RETURN(Recipe tc, ParseRecipe(fam, t));
  SetTinyRunProfile(t, std::min(P::kSeqLen, MaxSeq(tc)));
  return t;
}

}  // namespace ts::zoo::internal::encoder

namespace ts::zoo::internal::encoder {

std::vector<ArchEntry> Archs(EncoderFamily family) {
  // The entries' functions share the family, which lives as long as they do.
  const FamilyPtr fam = std::make_shared<const EncoderFamily>(std::move(family));
  std::vector<ArchEntry> out;
  for (const auto& [head, arch] : Classes(fam->bert_classes))
    out.push_back(BertEntry(fam, arch, head));
  for (const auto& [head, arch] : Classes(fam->classes)) out.push_back(Entry(fam, arch, head));
  return out;
}

}  // namespace ts::zoo::internal::encoder
