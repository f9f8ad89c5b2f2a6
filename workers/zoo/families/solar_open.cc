// solar_open (modular_solar_open.py): llama attention with q/k/v bias from attention_bias
// (o_proj never), full rotary on rope_theta 1e6; every layer DeepSeek-V3 MoE (no dense layer,
// no intermediate_size).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
DecoderFamily SolarOpen() {
  const DeepseekMoeSpec d{.experts = 128,
                          .top_k = 8,
                          .inter = 1280,
                          .shared = 1,
                          .scaling = 1.0,
                          .n_group = 1,
                          .topk_group = 1,
                          .norm_topk = true,
                          .dense_field = "",
                          .dense = 0};
  return {
      .model_type = "solar_open",
      .fields = {.inter = "", .head_dim = "head_dim"},  // SolarOpenConfig has no intermediate_size
      .defaults = {.inter_mult = 1, .max_pos = 131072, .eps = 1e-5, .head_dim = 128},
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(RotaryWithTheta(r, config, 1000000.0, "", 1.0, c));
        TS_ASSIGN_OR_RETURN(bool bias, r.Bool("attention_bias", false));
        c.q_bias = c.k_bias = c.v_bias = bias;
        c.o_bias = false;
        return OkStatus();
      },
      .parse_layers = DeepseekMoeParse(d),
      .scale_extra = DeepseekMoeScale(d),
      .aliases = {{"num_local_experts", "n_routed_experts"}},
      .classes = {"SolarOpenForCausalLM", "", "", "", "SolarOpenModel"},
      // upstage/Solar-Open-100B
      .example = R"({"model_type":"solar_open","vocab_size":196608,"hidden_size":4096,
           "moe_intermediate_size":1280,"num_hidden_layers":48,"num_attention_heads":64,
           "num_key_value_heads":8,"head_dim":128,"n_routed_experts":128,
           "num_experts_per_tok":8,"n_shared_experts":1,"n_group":1,"topk_group":1,
           "routed_scaling_factor":1.0,"norm_topk_prob":true,"hidden_act":"silu",
           "max_position_embeddings":131072,"rms_norm_eps":1e-5,"rope_theta":1000000,
           "attention_bias":false,"tie_word_embeddings":false})",
  };
}

TS_ZOO_DECODER_FAMILY(SolarOpen);

}  // namespace ts::zoo::internal::decoder
