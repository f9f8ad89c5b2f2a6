// ernie: BERT with task_type_embeddings (task 0) when use_task_id; nghuyong/ernie-3.0-base-zh.
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {

EncoderFamily Ernie() {
  json example = {{"model_type", "ernie"},
                  {"attention_probs_dropout_prob", 0.1},
                  {"hidden_act", "gelu"},
                  {"hidden_dropout_prob", 0.1},
                  {"hidden_size", 768},
                  {"initializer_range", 0.02},
                  {"intermediate_size", 3072},
                  {"layer_norm_eps", 1e-05},
                  {"max_position_embeddings", 2048},
                  {"num_attention_heads", 12},
                  {"num_hidden_layers", 12},
                  {"task_type_vocab_size", 3},
                  {"type_vocab_size", 4},
                  {"use_task_id", true},
                  {"vocab_size", 40000},
                  {"pad_token_id", 0}};
  return {
      .model_type = "ernie",
      .structure = {.base = "ernie."},
      .names = BertHeadNames(),
      .absolute_positions = true,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(bool task_id, r.Bool("use_task_id", false));
        if (!task_id) return OkStatus();
        TS_ASSIGN_OR_RETURN(c.task_types, r.Int("task_type_vocab_size", 3));
        return Positive(r, "task_type_vocab_size", c.task_types);
      },
      .classes = AllHeads("Ernie", /*causal=*/true, /*nsp=*/true, /*qa=*/true,
                          /*pretraining=*/true),
      .example = example,
  };
}

TS_ZOO_ENCODER_FAMILY(Ernie);

}  // namespace ts::zoo::internal::encoder
