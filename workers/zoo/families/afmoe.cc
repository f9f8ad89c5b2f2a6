// afmoe (modular_afmoe.py): llama projections without biases (attention_bias is forced False)
// and per-head q / k RMSNorm before the rotary, which only the sliding layers apply (the full
// layers are NoPE); the attention output gated by sigmoid(`self_attn.gate_proj`(x)) before
// o_proj (Recipe::attn_out_gate); sandwich norms (`input_layernorm`, `post_attention_layernorm`
// after the attention, `pre_mlp_layernorm`, `post_mlp_layernorm` after the MLP); the first
// num_dense_layers a gated MLP of intermediate_size, the rest AfmoeSparseMoeBlock: the float32
// sigmoid router `mlp.router.gate`, top-k of scores + `mlp.expert_bias`, the unbiased scores
// renormalised (+ 1e-20) times route_scale (Router::kDeepseekV3 without groups), fused experts
// (transformers 5's Qwen2MoeExperts layout) plus `mlp.shared_experts` of moe_intermediate_size *
// num_shared_experts; embeddings * sqrt(hidden) when mup_enabled. Layer types: layer_types, else
// sliding iff (i + 1) % global_attn_every_n_layers != 0.
#include <cmath>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

const DeepseekMoeSpec kAfmoeMoe = {.experts_field = "num_experts",
                                   .shared_field = "num_shared_experts",
                                   .experts = 64,
                                   .top_k = 6,
                                   .inter = 1408,
                                   .shared = 2,
                                   .scaling = 1.0,
                                   .n_group = 1,
                                   .topk_group = 1,
                                   .norm_topk = true,
                                   .dense_field = "num_dense_layers",
                                   .dense = 1};

// The sliding layers (window and rotary) from layer_types or global_attn_every_n_layers, with
// AfmoeConfig's sliding_window default 1024.
Status AfmoeLayers(const ConfigReader& r, const json& config, Recipe& c) {
  json cfg = config;
  if (!r.Has("sliding_window")) cfg["sliding_window"] = 1024;
  if (cfg["sliding_window"].is_null()) {
    return r.Error("sliding_window", "null not supported (the sliding layers need a window)");
  }
  TS_ASSIGN_OR_RETURN(int64_t every, r.Int("global_attn_every_n_layers", 4));
  if (every <= 0) return r.Error("global_attn_every_n_layers", "must be positive");
  if (!r.Has("layer_types")) cfg["sliding_window_pattern"] = every;
  const ConfigReader rc(cfg);
  return SlidingWithPattern(rc, cfg, every, /*rope_local=*/false, c);
}

}  // namespace

DecoderFamily Afmoe() {
  return {
      .model_type = "afmoe",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 16384, .eps = 1e-5, .head_dim = 128},
      .names = {.ln2 = "pre_mlp_layernorm",
                .post1 = "post_attention_layernorm",
                .post2 = "post_mlp_layernorm"},
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        c.block = Block::kSandwich;
        c.qk_norm = QkNorm::kPerHeadRms;
        c.attn_out_gate = true;
        TS_RETURN_IF_ERROR(AfmoeLayers(r, config, c));
        TS_ASSIGN_OR_RETURN(bool mup, r.Bool("mup_enabled", false));
        if (mup) c.embed_scale = std::sqrt(static_cast<double>(c.hidden));
        TS_RETURN_IF_ERROR(ReadDeepseekMoe(r, config, kAfmoeMoe, c));
        // AfmoeTokenChoiceRouter always renormalises and scales by route_scale; it reads neither
        // norm_topk_prob nor routed_scaling_factor.
        c.moe.norm_topk = true;
        TS_ASSIGN_OR_RETURN(c.moe.routed_scaling, r.Double("route_scale", 1.0));
        c.moe.router_name = "router.gate.weight";
        c.moe.score_bias_name = "expert_bias";
        return OkStatus();
      },
      .scale_extra =
          [](const json& real, const Recipe& rc, json& t) {
            ScaleDeepseekLike(kAfmoeMoe, real, rc, t);
            ScaleSlidingPattern(rc.rope_on, real, rc, t);
          },
      .classes = {"AfmoeForCausalLM", "", "", "", "AfmoeModel"},
      // AfmoeConfig's defaults (the class's documented configuration)
      .example = R"({"model_type":"afmoe","vocab_size":200192,"hidden_size":2048,
           "intermediate_size":6144,"moe_intermediate_size":1408,"num_hidden_layers":32,
           "num_dense_layers":1,"num_attention_heads":16,"num_key_value_heads":16,"head_dim":128,
           "hidden_act":"silu","max_position_embeddings":16384,"rms_norm_eps":1e-5,
           "rope_theta":10000.0,"num_experts":64,"num_experts_per_tok":6,"num_shared_experts":2,
           "route_scale":1.0,"global_attn_every_n_layers":4,"sliding_window":1024,
           "mup_enabled":false,"tie_word_embeddings":false})",
  };
}

TS_ZOO_DECODER_FAMILY(Afmoe);

}  // namespace ts::zoo::internal::decoder
