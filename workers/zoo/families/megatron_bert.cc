// megatron-bert: pre-LN BERT (attention.ln, ln, encoder.ln; no embedding LayerNorm);
// nvidia/megatron-bert-cased-345m.
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {

EncoderFamily MegatronBert() {
  json example = {{"model_type", "megatron-bert"},
                  {"attention_probs_dropout_prob", 0.1},
                  {"hidden_act", "gelu"},
                  {"hidden_dropout_prob", 0.1},
                  {"hidden_size", 1024},
                  {"initializer_range", 0.02},
                  {"intermediate_size", 4096},
                  {"layer_norm_eps", 1e-12},
                  {"max_position_embeddings", 512},
                  {"num_attention_heads", 16},
                  {"num_hidden_layers", 24},
                  {"type_vocab_size", 2},
                  {"vocab_size", 29056},
                  {"pad_token_id", 0}};
  return {
      .model_type = "megatron-bert",
      .structure = {.embedding_norm = false,
                    .pre_attn_norm = "attention.ln",
                    .pre_mlp_norm = "ln",
                    .final_norm = "encoder.ln",
                    .base = "bert."},
      .names = BertHeadNames(),
      .absolute_positions = true,
      .classes = AllHeads("MegatronBert", /*causal=*/true, /*nsp=*/true, /*qa=*/true,
                          /*pretraining=*/true),
      .example = example,
  };
}

TS_ZOO_ENCODER_FAMILY(MegatronBert);

}  // namespace ts::zoo::internal::encoder
