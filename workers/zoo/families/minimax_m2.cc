// minimax_m2 (modular_minimax_m2.py): Mixtral's blocks, every layer MoE of intermediate_size
// wide experts and no shared expert, with FlexOlmoAttention's whole-projection q/k RMSNorm and
// a partial rotary (partial_rotary_factor, top level or in the RoPE parameters; the hub's
// rotary_dim is not read); MiniMaxM2TopKRouter: sigmoid, + mlp.e_score_correction_bias for the
// choice, top-k, renormalised (DeepSeek-V3's with one group and no scaling).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
DecoderFamily MiniMaxM2() {
  const DeepseekMoeSpec d{.experts_field = "num_local_experts",
                          .shared_field = "",
                          .experts = 256,
                          .top_k = 8,
                          .shared = 0,
                          .inter_field = "",
                          .scaling = 1.0,
                          .n_group = 1,
                          .topk_group = 1,
                          .norm_topk = true,
                          .dense_field = "",
                          .dense = 0};
  return {
      .model_type = "minimax_m2",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 196608, .eps = 1e-6},
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        json rc = config;
        if (!r.Has("partial_rotary_factor")) {
          if (const std::optional<RopeParamsRef> ref = FindRopeParams(config)) {
            const json& p = RopeParams(config, *ref);
            if (p.contains("partial_rotary_factor"))
              rc["partial_rotary_factor"] = p["partial_rotary_factor"];
          }
        }
        TS_RETURN_IF_ERROR(
            RotaryWithTheta(ConfigReader(rc), rc, 5000000.0, "partial_rotary_factor", 1.0, c));
        c.qk_norm = QkNorm::kFullRms;
        return OkStatus();
      },
      .parse_layers = [d](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(ReadDeepseekMoe(r, config, d, c));
        c.moe.score_bias_name = "e_score_correction_bias";
        return OkStatus();
      },
      .scale_extra = DeepseekMoeScale(d),
      .aliases = {{"num_experts", "num_local_experts"}},
      .classes = {"MiniMaxM2ForCausalLM", "", "", "", "MiniMaxM2Model"},
      // MiniMaxAI/MiniMax-M2 (as transformers' converted config: partial_rotary_factor 0.5)
      .example = R"({"model_type":"minimax_m2","vocab_size":200064,"hidden_size":3072,
           "intermediate_size":1536,"num_hidden_layers":62,"num_attention_heads":48,
           "num_key_value_heads":8,"head_dim":128,"num_local_experts":256,
           "num_experts_per_tok":8,"partial_rotary_factor":0.5,"rotary_dim":64,
           "hidden_act":"silu","max_position_embeddings":196608,"rms_norm_eps":1e-6,
           "rope_theta":5000000,"scoring_func":"sigmoid","use_routing_bias":true,
           "tie_word_embeddings":false,"bos_token_id":200034,"eos_token_id":200020})",
  };
}

TS_ZOO_DECODER_FAMILY(MiniMaxM2);

}  // namespace ts::zoo::internal::decoder
