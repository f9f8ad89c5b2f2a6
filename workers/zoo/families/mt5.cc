// mt5: T5 (t5.cc) with the gated-gelu feed-forward and untied lm_head of its checkpoints.
#include "workers/zoo/families/t5.h"

namespace ts::zoo::internal {
namespace {

nlohmann::json Mt5Example() {  // google/mt5-small
  return nlohmann::json{{"model_type", "mt5"},
                        {"d_ff", 1024},
                        {"d_kv", 64},
                        {"d_model", 512},
                        {"decoder_start_token_id", 0},
                        {"dropout_rate", 0.1},
                        {"eos_token_id", 1},
                        {"feed_forward_proj", "gated-gelu"},
                        {"initializer_factor", 1.0},
                        {"is_encoder_decoder", true},
                        {"layer_norm_epsilon", 1e-06},
                        {"num_decoder_layers", 8},
                        {"num_heads", 6},
                        {"num_layers", 8},
                        {"pad_token_id", 0},
                        {"relative_attention_num_buckets", 32},
                        {"tie_word_embeddings", false},
                        {"tokenizer_class", "T5Tokenizer"},
                        {"vocab_size", 250112}};
}

std::vector<ArchEntry> Mt5Archs() {
  return T5StyleArchs("MT5", "mt5", Mt5Example(), Mt5Example());
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Mt5, Mt5Archs);

}  // namespace ts::zoo::internal
