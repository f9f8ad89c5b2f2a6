// bert: BertModel, BertForSequenceClassification and BertForMaskedLM on config.cc's BertConfig
// (the kBert lineage), the other heads (token classification, QA, multiple choice, LM head,
// next sentence) on the generic encoder recipe.
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {
namespace {

StatusOr<Recipe> BertRecipe(const json& config) {
  TS_ASSIGN_OR_RETURN(BertConfig b, ParseBertConfig(config));
  Recipe r{.base = "bert.", .lineage = Lineage::kBert};
  r.vocab = b.vocab_size;
  r.hidden = b.hidden_size;
  r.inter = b.intermediate_size;
  r.layers = b.num_hidden_layers;
  r.heads = b.num_attention_heads;
  r.max_pos = b.max_position_embeddings;
  r.type_vocab = b.type_vocab_size;
  r.embedding = b.hidden_size;
  r.act = b.hidden_act;
  r.eps = b.layer_norm_eps;
  r.init_range = b.initializer_range;
  r.pad = b.pad_token_id;
  r.num_labels = b.num_labels;
  return r;
}

}  // namespace

HeadNames BertHeadNames() {
  return {.pooler = "pooler.dense",
          .lm_dense = "cls.predictions.transform.dense",
          .lm_norm = "cls.predictions.transform.LayerNorm",
          .lm_bias = "cls.predictions"};
}

json BertExample() {  // bert-base-uncased
  return json{
      {"model_type", "bert"},           {"hidden_size", 768},      {"intermediate_size", 3072},
      {"num_attention_heads", 12},      {"num_hidden_layers", 12}, {"vocab_size", 30522},
      {"max_position_embeddings", 512}, {"type_vocab_size", 2},    {"hidden_act", "gelu"},
      {"layer_norm_eps", 1e-12},        {"pad_token_id", 0}};
}

EncoderFamily Bert() {
  return {
      .model_type = "bert",
      .structure = {.base = "bert."},
      .names = BertHeadNames(),
      .absolute_positions = true,
      .classes = {.token_cls = "BertForTokenClassification",
                  .qa = "BertForQuestionAnswering",
                  .multiple_choice = "BertForMultipleChoice",
                  .causal_lm = "BertLMHeadModel",
                  .next_sentence = "BertForNextSentencePrediction",
                  .pretraining = "BertForPreTraining"},
      .example = BertExample(),
      .bert_classes = {.base = "BertModel",
                       .seq_cls = "BertForSequenceClassification",
                       .masked_lm = "BertForMaskedLM"},
      .bert_recipe = BertRecipe,
  };
}

TS_ZOO_ENCODER_FAMILY(Bert);

}  // namespace ts::zoo::internal::encoder
