// mt5: T5 (t5.cc) with the gated-gelu feed-forward and untied lm_head of its checkpoints.
// umt5 (modeling_umt5.py): mT5's layers, but every self-attention layer owns its
// relative_attention_bias (UMT5Attention(has_relative_attention_bias=True) in each
// UMT5LayerSelfAttention) and computes its own position bias; cross-attention has none.
#include "workers/zoo/families/family_lists.h"
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

nlohmann::json Umt5Example() {  // google/umt5-small
  return nlohmann::json{{"model_type", "umt5"},
                        {"d_ff", 1024},
                        {"d_kv", 64},
                        {"d_model", 512},
                        {"decoder_start_token_id", 0},
                        {"dense_act_fn", "gelu_new"},
                        {"dropout_rate", 0.1},
                        {"eos_token_id", 1},
                        {"feed_forward_proj", "gated-gelu"},
                        {"initializer_factor", 1.0},
                        {"is_encoder_decoder", true},
                        {"is_gated_act", true},
                        {"layer_norm_epsilon", 1e-06},
                        {"num_decoder_layers", 8},
                        {"num_heads", 6},
                        {"num_layers", 8},
                        {"pad_token_id", 0},
                        {"relative_attention_max_distance", 128},
                        {"relative_attention_num_buckets", 32},
                        {"scalable_attention", true},
                        {"tie_word_embeddings", false},
                        {"tokenizer_class", "T5Tokenizer"},
                        {"vocab_size", 256384}};
}

}  // namespace

std::vector<ArchEntry> Umt5Archs() {
  return T5StyleArchs("UMT5", "umt5", Umt5Example(), Umt5Example());
}

std::vector<ArchEntry> Mt5Archs() {
  return T5StyleArchs("MT5", "mt5", Mt5Example(), Mt5Example());
}

}  // namespace ts::zoo::internal
