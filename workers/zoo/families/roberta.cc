// roberta: position ids after the pad id (cumsum(ids != pad) * (ids != pad) + pad), lm_head.*,
// a classifier.dense + out_proj sequence head; the base of its lineage (xlm-roberta, camembert,
// data2vec-text, roberta-prelayernorm, xlm-roberta-xl).
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {

json RobertaExample(const char* model_type, int64_t vocab, int64_t bos, int64_t eos) {
  return json{{"model_type", model_type},   {"attention_probs_dropout_prob", 0.1},
              {"bos_token_id", bos},        {"eos_token_id", eos},
              {"pad_token_id", 1},          {"hidden_act", "gelu"},
              {"hidden_dropout_prob", 0.1}, {"hidden_size", 768},
              {"initializer_range", 0.02},  {"intermediate_size", 3072},
              {"layer_norm_eps", 1e-05},    {"max_position_embeddings", 514},
              {"num_attention_heads", 12},  {"num_hidden_layers", 12},
              {"type_vocab_size", 1},       {"vocab_size", vocab}};
}

HeadNames RobertaHeadNames() {
  return {.pooler = "pooler.dense",
          .seq_pooled = false,
          .seq_dense = "classifier.dense",
          .seq_act = DenseAct::kTanh,
          .seq_out = "classifier.out_proj",
          .lm_dense = "lm_head.dense",
          .lm_norm = "lm_head.layer_norm",
          .lm_bias = "lm_head",
          .lm_embedding_width = false,
          .lm_hidden_act = false};
}

EncoderFamily RobertaLineage(const std::string& model_type, const std::string& prefix,
                             const std::string& base, json example) {
  return {
      .model_type = model_type,
      .defaults = {.pad = 1},
      .structure = {.positions = Positions::kAfterPad, .base = base},
      .names = RobertaHeadNames(),
      .absolute_positions = true,
      .classes = AllHeads(prefix, /*causal=*/true),
      .example = std::move(example),
  };
}

EncoderFamily Roberta() {  // roberta-base
  return RobertaLineage("roberta", "Roberta", "roberta.", RobertaExample("roberta", 50265, 0, 2));
}

TS_ZOO_ENCODER_FAMILY(Roberta);

}  // namespace ts::zoo::internal::encoder
