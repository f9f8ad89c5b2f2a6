// glm4: glm with post-attention / post-MLP sandwich norms.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Glm4() {
  return {
      .model_type = "glm4",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 32768, .eps = 1.5625e-07},
      .names = {.post1 = "post_self_attn_layernorm", .post2 = "post_mlp_layernorm"},
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(GlmLayers(r, config, c));
        c.block = Block::kSandwich;
        return OkStatus();
      },
      .classes = {"Glm4ForCausalLM",
                  "Glm4ForSequenceClassification",
                  "Glm4ForTokenClassification",
                  "",
                  "Glm4Model"},
      // THUDM/GLM-4-9B-0414
      .example = R"({"hidden_size":4096,"intermediate_size":13696,"num_attention_heads":32,"num_key_value_heads":2,
         "head_dim":128,"num_hidden_layers":40,"vocab_size":151552,"max_position_embeddings":32768,
         "rms_norm_eps":1e-5,"rope_theta":10000.0,"partial_rotary_factor":0.5,"hidden_act":"silu",
         "attention_bias":true,"tie_word_embeddings":false,"pad_token_id":151329,"eos_token_id":151329})",
  };
}

TS_ZOO_DECODER_FAMILY(Glm4);

}  // namespace ts::zoo::internal::decoder
