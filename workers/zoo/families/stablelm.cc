// stablelm: LayerNorm, partial rotary 0.25, `use_qkv_bias`, optional parallel residual.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily StableLm() {
  return {
      .model_type = "stablelm",
      .fields = {.eps = "layer_norm_eps"},
      .defaults = {.eps = 1e-5},
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(ReadClassicRotary(r, config, "partial_rotary_factor", 0.25, false, c));
        TS_ASSIGN_OR_RETURN(c.q_bias, r.Bool("use_qkv_bias", false));
        c.k_bias = c.v_bias = c.q_bias;
        TS_ASSIGN_OR_RETURN(bool parallel, r.Bool("use_parallel_residual", false));
        if (parallel) c.block = Block::kParallel1;
        c.norm = Norm::kLayerNorm;
        return RejectQkLayerNorm(r);
      },
      .classes = {"StableLmForCausalLM",
                  "StableLmForSequenceClassification",
                  "StableLmForTokenClassification",
                  "",
                  "StableLmModel"},
      // stabilityai/stablelm-3b-4e1t
      .example = R"({"model_type":"stablelm","hidden_size":2560,"intermediate_size":6912,
           "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
           "vocab_size":50304,"max_position_embeddings":4096,"layer_norm_eps":1e-5,
           "rope_theta":10000,"partial_rotary_factor":0.25,"hidden_act":"silu",
           "use_qkv_bias":false,"tie_word_embeddings":false,"bos_token_id":0,
           "eos_token_id":0})",
  };
}

TS_ZOO_DECODER_FAMILY(StableLm);

}  // namespace ts::zoo::internal::decoder
