// phi: parallel block over one LayerNorm, partial rotary, biased projections and lm_head; phi-msft
// (n_embd) field names.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Phi() {
  return {
      .model_type = "phi",
      .defaults = {.inter_mult = 4, .act = "gelu_new", .eps = 1e-5},
      .names = {.o = "dense", .up = "fc1", .down = "fc2", .final_norm = "final_layernorm"},
      .llama_biases = false,
      .classic = true,
      .config_fields = [](const json& config) {
        ConfigReader r(config);
        if (!r.Has("hidden_size") && r.Has("n_embd")) {
          return Fields{.hidden = "n_embd",
                        .inter = "n_inner",
                        .layers = "n_layer",
                        .heads = "n_head",
                        .kv = "n_head_kv",
                        .max_pos = "n_positions",
                        .act = "activation_function",
                        .eps = "layer_norm_epsilon"};
        }
        return Fields{.act = "hidden_act", .eps = "layer_norm_eps"};
      },
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        if (r.Has("rotary_dim") && !r.Has("partial_rotary_factor")) {
          TS_RETURN_IF_ERROR(ReadClassicRotary(r, config, "rotary_dim", 1.0, true, c));
        } else {
          TS_RETURN_IF_ERROR(ReadClassicRotary(r, config, "partial_rotary_factor", 0.5, false, c));
        }
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = true;
        c.lm_head_bias = !c.tie;
        c.norm = Norm::kLayerNorm;
        c.mlp = Mlp::kPlain;
        c.block = Block::kParallel1;
        return RejectQkLayerNorm(r);
      },
      .classes = {"PhiForCausalLM",
                  "PhiForSequenceClassification",
                  "PhiForTokenClassification",
                  "",
                  "PhiModel"},
      // microsoft/phi-2 (transformers format)
      .example = R"({"model_type":"phi","hidden_size":2560,"intermediate_size":10240,
           "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
           "vocab_size":51200,"max_position_embeddings":2048,"layer_norm_eps":1e-5,
           "rope_theta":10000.0,"partial_rotary_factor":0.4,"hidden_act":"gelu_new",
           "qk_layernorm":false,"tie_word_embeddings":false,"bos_token_id":50256,
           "eos_token_id":50256})",
  };
}

TS_ZOO_DECODER_FAMILY(Phi);

}  // namespace ts::zoo::internal::decoder
