// dots1 (modular_dots1.py): Qwen3Attention (per-head q/k RMSNorm before the rotary,
// attention_bias on q / k / v / o) with DeepSeek-V3's MoE (norm_topk_prob false,
// first_k_dense_replace 0; the expert counts have no default); layers from max_window_layers
// slide whenever sliding_window is set (use_sliding_window is not read).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
DecoderFamily Dots1() {
  const DeepseekMoeSpec d{.experts = -1,
                          .top_k = -1,
                          .inter = 1408,
                          .shared = -1,
                          .scaling = 1.0,
                          .n_group = 1,
                          .topk_group = 1,
                          .norm_topk = false,
                          .dense = 0};
  DecoderFamily f = Qwen3();
  f.model_type = "dots1";
  f.defaults = {.max_pos = 2048, .eps = 1e-6};
  f.windows = WindowPattern::kNone;
  f.parse_layers = [d](const ConfigReader& r, const json& config, Recipe& c) -> Status {
    std::optional<int64_t> w;
    TS_RETURN_IF_ERROR(ReadWindow(r, w));
    if (w && *w < c.max_pos) {
      TS_ASSIGN_OR_RETURN(int64_t from, r.Int("max_window_layers", 62));
      for (int64_t i = from; i < c.layers; ++i) c.window[static_cast<size_t>(i)] = w;
      c.window_size = w;
    }
    return ReadDeepseekMoe(r, config, d, c);
  };
  f.scale_extra = DeepseekMoeScale(d);
  f.aliases = {};
  f.qa_base = "";
  f.classes = {"Dots1ForCausalLM", "", "", "", "Dots1Model"};
  // rednote-hilab/dots.llm1.base
  f.example = R"({"model_type":"dots1","vocab_size":152064,"hidden_size":4096,
       "intermediate_size":10944,"moe_intermediate_size":1408,"num_hidden_layers":62,
       "num_attention_heads":32,"num_key_value_heads":32,"head_dim":128,
       "n_routed_experts":128,"num_experts_per_tok":6,"n_shared_experts":2,
       "first_k_dense_replace":1,"n_group":1,"topk_group":1,"norm_topk_prob":true,
       "routed_scaling_factor":2.5,"scoring_func":"noaux_tc","hidden_act":"silu",
       "max_position_embeddings":32768,"rms_norm_eps":1e-5,"rope_theta":10000000,
       "sliding_window":null,"max_window_layers":62,"attention_bias":false,
       "tie_word_embeddings":false})";
  return f;
}

TS_ZOO_DECODER_FAMILY(Dots1);

}  // namespace ts::zoo::internal::decoder
