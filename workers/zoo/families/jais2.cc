// jais2 (modular_jais2.py): llama's pre-norm layers with nn.LayerNorm (weight and bias,
// layer_norm_eps) for every norm, NemotronMLP's non-gated down(relu2(up(x))), and biases on
// q / k / v / o (attention_bias) and up / down (mlp_bias), both true by default.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Jais2() {
  return {
      .model_type = "jais2",
      .fields = {.head_dim = "head_dim", .eps = "layer_norm_eps"},
      .defaults = {.max_pos = 8192, .act = "relu2", .eps = 1e-5},
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(bool attention_bias, r.Bool("attention_bias", true));
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = attention_bias;
        TS_ASSIGN_OR_RETURN(c.mlp_bias, r.Bool("mlp_bias", true));
        c.norm = Norm::kLayerNorm;
        c.mlp = Mlp::kPlain;
        return OkStatus();
      },
      .classes = {"Jais2ForCausalLM", "", "", "", "Jais2Model"},
      // inceptionai/Jais-2-8B-Chat (Jais2Config's defaults)
      .example = R"({"model_type":"jais2","vocab_size":150272,"hidden_size":3328,
           "intermediate_size":26624,"num_hidden_layers":32,"num_attention_heads":26,
           "num_key_value_heads":26,"head_dim":128,"hidden_act":"relu2",
           "max_position_embeddings":8192,"layer_norm_eps":1e-5,"rope_theta":500000,
           "attention_bias":true,"mlp_bias":true,"tie_word_embeddings":false,
           "bos_token_id":0,"eos_token_id":150024})",
  };
}

TS_ZOO_DECODER_FAMILY(Jais2);

}  // namespace ts::zoo::internal::decoder
