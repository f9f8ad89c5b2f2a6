// persimmon: per-head fused `query_key_value`, per-head q/k LayerNorm (with bias), ReLU^2, partial
// rotary.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Persimmon() {
  return {
      .model_type = "persimmon",
      .fields = {.kv = "", .eps = "layer_norm_eps"},
      .defaults = {.max_pos = 16384, .act = "relu2", .eps = 1e-5, .theta = 25000.0},
      .names = {.qkv = "query_key_value",
                .o = "dense",
                .qn = "q_layernorm",
                .kn = "k_layernorm",
                .up = "dense_h_to_4h",
                .down = "dense_4h_to_h",
                .final_norm = "final_layernorm"},
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        c.norm = Norm::kLayerNorm;
        c.qkv = Qkv::kPerHead;
        c.mlp = Mlp::kPlain;
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = true;
        TS_ASSIGN_OR_RETURN(bool qk, r.Bool("qk_layernorm", true));
        if (qk) c.qk_norm = QkNorm::kPerHeadLayerNorm;
        return ReadPartial(r, "partial_rotary_factor", 0.5, c);
      },
      .classes = {"PersimmonForCausalLM",
                  "PersimmonForSequenceClassification",
                  "PersimmonForTokenClassification",
                  "",
                  "PersimmonModel"},
      // adept/persimmon-8b-base
      .example = R"({"hidden_size":4096,"intermediate_size":16384,"num_attention_heads":64,"num_hidden_layers":36,
         "vocab_size":262144,"max_position_embeddings":16384,"layer_norm_eps":1e-5,"hidden_act":"relu2",
         "qk_layernorm":true,"partial_rotary_factor":0.5,"rope_theta":25000.0,"tie_word_embeddings":false,
         "bos_token_id":71013,"eos_token_id":71013})",
  };
}

TS_ZOO_DECODER_FAMILY(Persimmon);

}  // namespace ts::zoo::internal::decoder
