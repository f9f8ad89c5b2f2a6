// deepseek_v2 (modeling_deepseek_v2.py): llama's pre-norm layers with multi-head latent attention
// (q LoRA or q_proj; adjacent-pair rotary, no rope_interleave field; mlp_bias) and DeepSeek-V2 MoE
// layers from first_k_dense_replace on: softmax router, greedy or group-limited greedy, times
// routed_scaling_factor (deepseek_readers.cc).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

// DeepseekV2Config (num_experts_per_tok has no default)
const DeepseekMoeSpec kV2Moe = {.sigmoid = false,
                                .experts = 64,
                                .top_k = -1,
                                .inter = 1407,
                                .shared = 2,
                                .scaling = 1.0,
                                .n_group = 1,
                                .topk_group = 1,
                                .norm_topk = false,
                                .dense = 0};

}  // namespace

DecoderFamily DeepseekV2() {
  return {
      .model_type = "deepseek_v2",
      .defaults = {.max_pos = 2048, .eps = 1e-6},
      .llama_biases = false,
      .classic = true,
      // v2 has no rope_interleave field (always pairs); v3 has no mlp_bias.
      .parse = MlaParse(MlaSpec(), /*reads_interleave=*/false, /*reads_mlp_bias=*/true),
      .parse_layers = DeepseekMoeParse(kV2Moe),
      .scale_extra = DeepseekMoeScale(kV2Moe),
      .aliases = {{"num_experts", "n_routed_experts"}},
      .classes = {"DeepseekV2ForCausalLM", "DeepseekV2ForSequenceClassification", "", "",
                  "DeepseekV2Model"},
      // deepseek-ai/DeepSeek-V2-Lite
      .example = R"({"model_type":"deepseek_v2","vocab_size":102400,"hidden_size":2048,
           "intermediate_size":10944,"moe_intermediate_size":1408,"num_hidden_layers":27,
           "num_attention_heads":16,"num_key_value_heads":16,"n_shared_experts":2,
           "n_routed_experts":64,"routed_scaling_factor":1.0,"kv_lora_rank":512,
           "q_lora_rank":null,"qk_rope_head_dim":64,"v_head_dim":128,"qk_nope_head_dim":128,
           "topk_method":"greedy","n_group":1,"topk_group":1,"num_experts_per_tok":6,
           "moe_layer_freq":1,"first_k_dense_replace":1,"norm_topk_prob":false,
           "scoring_func":"softmax","hidden_act":"silu","max_position_embeddings":163840,
           "rms_norm_eps":1e-6,"rope_theta":10000,"rope_scaling":{"type":"yarn","factor":40,
           "original_max_position_embeddings":4096,"beta_fast":32,"beta_slow":1,"mscale":0.707,
           "mscale_all_dim":0.707},"attention_bias":false,"tie_word_embeddings":false,
           "bos_token_id":100000,"eos_token_id":100001})",
  };
}

TS_ZOO_DECODER_FAMILY(DeepseekV2);

}  // namespace ts::zoo::internal::decoder
