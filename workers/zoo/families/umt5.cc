// umt5 (modeling_umt5.py): mT5's layers (mt5.cc, on t5.cc's structure), but every
// self-attention layer owns its relative_attention_bias (UMT5Attention(
// has_relative_attention_bias=True) in each UMT5LayerSelfAttention) and computes its own position
// bias; cross-attention has none.
#include "workers/zoo/families/t5.h"

namespace ts::zoo::internal {
namespace {

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

std::vector<ArchEntry> Umt5Archs() {
  return T5StyleArchs("UMT5", "umt5", Umt5Example(), Umt5Example());
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Umt5, Umt5Archs);

}  // namespace ts::zoo::internal
