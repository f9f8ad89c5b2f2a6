// bert-generation: BERT without token types or pooler; the decoder is tied to the word
// embeddings with no transform (lm_head.bias). google/bert_for_seq_generation_L-24_bbc_encoder.
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {

EncoderFamily BertGeneration() {
  json example = {{"model_type", "bert-generation"},
                  {"attention_probs_dropout_prob", 0.1},
                  {"bos_token_id", 2},
                  {"eos_token_id", 1},
                  {"hidden_act", "gelu"},
                  {"hidden_dropout_prob", 0.1},
                  {"hidden_size", 1024},
                  {"initializer_range", 0.02},
                  {"intermediate_size", 4096},
                  {"layer_norm_eps", 1e-12},
                  {"max_position_embeddings", 512},
                  {"num_attention_heads", 16},
                  {"num_hidden_layers", 24},
                  {"pad_token_id", 0},
                  {"vocab_size", 50358}};
  return {
      .model_type = "bert-generation",
      .defaults = {.type_vocab = -1},
      .structure = {.base = "bert."},
      .names = {.lm_bias = "lm_head"},
      .absolute_positions = true,
      .classes = {.base = "BertGenerationEncoder", .causal_lm = "BertGenerationDecoder"},
      .example = example,
      // BertGenerationDecoder's lm_head is a bare decoder Linear with its own bias parameter.
      .state_dict = {.bare_lm_head = true},
  };
}

TS_ZOO_ENCODER_FAMILY(BertGeneration);

}  // namespace ts::zoo::internal::encoder
