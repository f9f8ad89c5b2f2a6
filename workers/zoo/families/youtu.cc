// youtu (modular_youtu.py): dense llama blocks (gated SiLU MLP) with DeepseekV3Attention (MLA,
// q_a / kv_a layernorms at eps 1e-6), tied embeddings.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
DecoderFamily Youtu() {
  return {
      .model_type = "youtu",
      .defaults = {.max_pos = 131072, .eps = 1e-6, .tie = true},
      .llama_biases = false,
      .classic = true,
      .parse = MlaParse(
          {.q_lora = 1536, .kv_lora = 512, .nope = 128, .rope = 64, .v = 128, .ln_eps = 1e-6},
          /*reads_interleave=*/true, /*reads_mlp_bias=*/false),
      .scale_extra = DeepseekMoeScale(DeepseekMoeSpec()),  // the MLA widths (no MoE layers)
      .classes = {"YoutuForCausalLM", "", "", "", "YoutuModel"},
      // tencent/Youtu-LLM-2B (YoutuConfig's defaults)
      .example = R"({"model_type":"youtu","vocab_size":128256,"hidden_size":2048,
           "intermediate_size":6144,"num_hidden_layers":32,"num_attention_heads":16,
           "num_key_value_heads":16,"q_lora_rank":1536,"kv_lora_rank":512,
           "qk_rope_head_dim":64,"qk_nope_head_dim":128,"v_head_dim":128,
           "rope_interleave":true,"attention_bias":false,"hidden_act":"silu",
           "max_position_embeddings":131072,"rms_norm_eps":1e-6,"rope_theta":10000,
           "tie_word_embeddings":true,"bos_token_id":128000,"eos_token_id":128001})",
  };
}

TS_ZOO_DECODER_FAMILY(Youtu);

}  // namespace ts::zoo::internal::decoder
