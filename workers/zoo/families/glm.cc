// glm: fused `gate_up_proj`, partial (0.5) interleaved rotary, q/k/v bias only.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

// GLM's attention and MLP (shared by glm4): fused gate_up_proj, partial interleaved rotary,
// q/k/v bias only (attention_bias defaults to true).
Status GlmLayers(const ConfigReader& r, const json&, Recipe& c) {
  c.mlp = Mlp::kFusedGateUp;
  c.interleaved = true;
  TS_RETURN_IF_ERROR(ReadPartial(r, "partial_rotary_factor", 0.5, c));
  TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", true));
  c.q_bias = c.k_bias = c.v_bias = ab;  // o_proj has no bias
  c.o_bias = false;
  c.mlp_bias = false;
  return OkStatus();
}

DecoderFamily Glm() {
  return {
      .model_type = "glm",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 131072, .eps = 1.5625e-07},
      .parse = GlmLayers,
      .classes = {"GlmForCausalLM",
                  "GlmForSequenceClassification",
                  "GlmForTokenClassification",
                  "",
                  "GlmModel"},
      // THUDM/glm-4-9b-hf
      .example = R"({"hidden_size":4096,"intermediate_size":13696,"num_attention_heads":32,"num_key_value_heads":2,
         "head_dim":128,"num_hidden_layers":40,"vocab_size":151552,"max_position_embeddings":131072,
         "rms_norm_eps":1.5625e-07,"rope_theta":10000.0,"partial_rotary_factor":0.5,"hidden_act":"silu",
         "attention_bias":true,"tie_word_embeddings":false,"pad_token_id":151329,
         "eos_token_id":[151329,151336,151338]})",
  };
}

TS_ZOO_DECODER_FAMILY(Glm);

}  // namespace ts::zoo::internal::decoder
