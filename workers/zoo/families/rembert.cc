// rembert (modeling_rembert.py): BERT's layers over a narrow input embedding
// (input_embedding_size, its LayerNorm at that width) mapped to the hidden size by
// encoder.embedding_hidden_mapping_in, as ALBERT's; the pooler is pooler.dense; the LM head
// (cls.predictions) is dense to output_embedding_size, hidden_act, LayerNorm, then its own
// decoder Linear (not tied: tie_word_embeddings defaults to false). google/rembert.
#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::encoder {
namespace {

Status ParseRemBertWidths(const ConfigReader& r, const json&, Recipe& c) {
  TS_ASSIGN_OR_RETURN(c.embedding, r.Int("input_embedding_size", 256));
  TS_RETURN_IF_ERROR(Positive(r, "input_embedding_size", c.embedding));
  TS_ASSIGN_OR_RETURN(c.lm_width, r.Int("output_embedding_size", 1664));
  TS_RETURN_IF_ERROR(Positive(r, "output_embedding_size", c.lm_width));
  TS_ASSIGN_OR_RETURN(bool tie, r.Bool("tie_word_embeddings", false));
  if (tie) return r.Error("tie_word_embeddings", "true is not supported by the zoo");
  return OkStatus();
}

void ScaleRemBertWidths(const Recipe& real, json& t) {
  const int64_t hidden = t["hidden_size"].get<int64_t>();
  t["input_embedding_size"] = ScaleRatio(real.embedding, real.hidden, hidden, 8);
  t["output_embedding_size"] = ScaleRatio(real.lm_width, real.hidden, hidden, 8);
}

}  // namespace

EncoderFamily RemBert() {
  HeadNames names = BertHeadNames();
  names.lm_dense = "cls.predictions.dense";
  names.lm_norm = "cls.predictions.LayerNorm";
  names.lm_bias = "cls.predictions.decoder";
  names.lm_untied = true;
  json example = {{"model_type", "rembert"},       {"attention_probs_dropout_prob", 0.0},
                  {"bos_token_id", 312},           {"eos_token_id", 313},
                  {"hidden_act", "gelu"},          {"hidden_dropout_prob", 0.0},
                  {"hidden_size", 1152},           {"initializer_range", 0.02},
                  {"input_embedding_size", 256},   {"intermediate_size", 4608},
                  {"layer_norm_eps", 1e-12},       {"max_position_embeddings", 512},
                  {"num_attention_heads", 18},     {"num_hidden_layers", 32},
                  {"output_embedding_size", 1664}, {"pad_token_id", 0},
                  {"tie_word_embeddings", false},  {"type_vocab_size", 2},
                  {"vocab_size", 250300}};
  return {
      .model_type = "rembert",
      .structure = {.projection = Projection::kAlbert, .base = "rembert."},
      .names = names,
      .absolute_positions = true,
      .parse_late = ParseRemBertWidths,
      .scale_extra = ScaleRemBertWidths,
      .classes = AllHeads("RemBert", /*causal=*/true),
      .example = example,
  };
}

TS_ZOO_ENCODER_FAMILY(RemBert);

}  // namespace ts::zoo::internal::encoder
