// deepseek_v3 (modeling_deepseek_v3.py): llama's pre-norm layers with multi-head latent attention
// (q LoRA, rope_interleave) and DeepSeek-V3 MoE layers from first_k_dense_replace on: sigmoid
// router with e_score_correction_bias, groups by their top-2 sum, renormalised when
// norm_topk_prob, times routed_scaling_factor (deepseek_readers.cc).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

// DeepseekV3Config
const DeepseekMoeSpec kV3Moe = {};

}  // namespace

DecoderFamily DeepseekV3() {
  return {
      .model_type = "deepseek_v3",
      .defaults = {.max_pos = 4096, .eps = 1e-6},
      .llama_biases = false,
      .classic = true,
      // v2 has no rope_interleave field (always pairs); v3 has no mlp_bias.
      .parse = MlaParse(MlaSpec(), /*reads_interleave=*/true, /*reads_mlp_bias=*/false),
      .parse_layers = DeepseekMoeParse(kV3Moe),
      .scale_extra = DeepseekMoeScale(kV3Moe),
      .aliases = {{"num_local_experts", "n_routed_experts"}},
      .classes = {"DeepseekV3ForCausalLM", "DeepseekV3ForSequenceClassification",
                  "DeepseekV3ForTokenClassification", "", "DeepseekV3Model"},
      // deepseek-ai/DeepSeek-V3
      .example = R"({"model_type":"deepseek_v3","vocab_size":129280,"hidden_size":7168,
           "intermediate_size":18432,"moe_intermediate_size":2048,"num_hidden_layers":61,
           "num_attention_heads":128,"num_key_value_heads":128,"n_shared_experts":1,
           "n_routed_experts":256,"routed_scaling_factor":2.5,"kv_lora_rank":512,
           "q_lora_rank":1536,"qk_rope_head_dim":64,"v_head_dim":128,"qk_nope_head_dim":128,
           "topk_method":"noaux_tc","n_group":8,"topk_group":4,"num_experts_per_tok":8,
           "moe_layer_freq":1,"first_k_dense_replace":3,"norm_topk_prob":true,
           "scoring_func":"sigmoid","hidden_act":"silu","max_position_embeddings":163840,
           "rms_norm_eps":1e-6,"rope_theta":10000,"rope_scaling":{"type":"yarn","factor":40,
           "original_max_position_embeddings":4096,"beta_fast":32,"beta_slow":1,"mscale":1.0,
           "mscale_all_dim":1.0},"attention_bias":false,"tie_word_embeddings":false,
           "bos_token_id":0,"eos_token_id":1})",
  };
}

TS_ZOO_DECODER_FAMILY(DeepseekV3);

}  // namespace ts::zoo::internal::decoder
