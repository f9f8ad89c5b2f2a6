// exaone_moe (modular_exaone_moe.py): OlmoeDecoderLayer's pre-norm blocks with EXAONE-4's
// attention (bias-free, per-head q/k RMSNorm before the rotary; with a sliding window the
// rotary runs on the sliding layers only, the full ones are NoPE) and DeepSeek-V3's MoE
// (num_experts / num_shared_experts; first_k_dense_replace 1 unless mlp_layer_types).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

// The sliding layers (rope only there, NoPE full layers) of exaone_moe at the tiny depth, when the
// real config has a window at all.
void ScaleExaoneMoeWindows(const json& real, const Recipe& rc, json& t) {
  if (real.contains("sliding_window") && real["sliding_window"].is_null()) return;
  ScaleSlidingPattern(rc.rope_on, real, rc, t);
}

}  // namespace

DecoderFamily ExaoneMoe() {
  const DeepseekMoeSpec d{.experts_field = "num_experts",
                          .shared_field = "num_shared_experts",
                          .experts = 64,
                          .top_k = 8,
                          .inter = 1024,
                          .shared = 1,
                          .scaling = 2.5,
                          .n_group = 1,
                          .topk_group = 1,
                          .norm_topk = true,
                          .dense_field = "first_k_dense_replace",
                          .dense = 1,
                          .layer_types_field = true};
  return {
      .model_type = "exaone_moe",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 2048, .eps = 1e-5},
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(RotaryWithTheta(r, config, 10000.0, "", 1.0, c));
        c.qk_norm = QkNorm::kPerHeadRms;
        return SlidingWithPattern(r, config, /*pattern_default=*/4, /*rope_local=*/false, c);
      },
      .parse_layers = DeepseekMoeParse(d),
      .scale_extra =
          [d](const json& real, const Recipe& rc, json& t) {
            ScaleDeepseekLike(d, real, rc, t);
            ScaleExaoneMoeWindows(real, rc, t);
          },
      .classes = {"ExaoneMoeForCausalLM", "", "", "", "ExaoneMoeModel"},
      // modelled on LGAI-EXAONE/K-EXAONE-236B-A23B (3:1 sliding / full, 128-token window)
      .example = R"({"model_type":"exaone_moe","vocab_size":153600,"hidden_size":6144,
           "intermediate_size":18432,"moe_intermediate_size":2048,"num_hidden_layers":48,
           "num_attention_heads":64,"num_key_value_heads":8,"head_dim":128,
           "num_experts":128,"num_experts_per_tok":8,"num_shared_experts":1,
           "first_k_dense_replace":1,"n_group":1,"topk_group":1,"routed_scaling_factor":2.5,
           "norm_topk_prob":true,"sliding_window":128,"sliding_window_pattern":4,
           "hidden_act":"silu","max_position_embeddings":262144,"rms_norm_eps":1e-5,
           "rope_theta":1000000,"tie_word_embeddings":false,"bos_token_id":1,
           "eos_token_id":53,"pad_token_id":0})",
  };
}

TS_ZOO_DECODER_FAMILY(ExaoneMoe);

}  // namespace ts::zoo::internal::decoder
