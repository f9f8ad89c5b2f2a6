// The DeepSeek lineage's families (glm4_moe, glm4_moe_lite, dots1, solar_open, exaone_moe,
// minimax_m2, ernie4_5_moe, youtu): deepseek.cc's multi-head latent attention and DeepSeek MoE
// readers under each config class's defaults and field names.
#include "workers/zoo/families/decoder_families.h"

namespace ts::zoo::internal::decoder {
namespace {

// The sliding layers (rope only there, NoPE full layers) of exaone_moe at the tiny depth, when the
// real config has a window at all.
void ScaleExaoneMoeWindows(const json& real, const Recipe& rc, json& t) {
  if (real.contains("sliding_window") && real["sliding_window"].is_null()) return;
  ScaleSlidingPattern(rc.rope_on, real, rc, t);
}

}  // namespace

// glm4_moe (modular_glm4_moe.py): llama attention with q/k/v bias from attention_bias (o_proj
// never), per-head q/k RMSNorm before the rotary when use_qk_norm, rotate_half over
// partial_rotary_factor (0.5) of the head; DeepSeek-V3 MoE from first_k_dense_replace (1).
DecoderFamily Glm4Moe() {
  const DeepseekMoeSpec d{.experts = 128, .top_k = 8, .inter = 1408, .shared = 1, .scaling = 1.0,
                      .n_group = 1, .topk_group = 1, .norm_topk = true, .dense = 1};
  return {
      .model_type = "glm4_moe",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 131072, .eps = 1e-5},
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(
            RotaryWithTheta(r, config, 10000.0, "partial_rotary_factor", 0.5, c));
        TS_ASSIGN_OR_RETURN(bool bias, r.Bool("attention_bias", false));
        c.q_bias = c.k_bias = c.v_bias = bias;
        c.o_bias = false;
        TS_ASSIGN_OR_RETURN(bool qk, r.Bool("use_qk_norm", false));
        if (qk) c.qk_norm = QkNorm::kPerHeadRms;
        return OkStatus();
      },
      .parse_layers = DeepseekMoeParse(d),
      .scale_extra = DeepseekMoeScale(d),
      .aliases = {{"num_local_experts", "n_routed_experts"}},
      .classes = {"Glm4MoeForCausalLM", "", "", "", "Glm4MoeModel"},
      // zai-org/GLM-4.5-Air
      .example = R"({"model_type":"glm4_moe","vocab_size":151552,"hidden_size":4096,
           "intermediate_size":10944,"moe_intermediate_size":1408,"num_hidden_layers":46,
           "num_attention_heads":96,"num_key_value_heads":8,"head_dim":128,
           "partial_rotary_factor":0.5,"attention_bias":true,"use_qk_norm":false,
           "n_routed_experts":128,"num_experts_per_tok":8,"n_shared_experts":1,
           "first_k_dense_replace":1,"n_group":1,"topk_group":1,"routed_scaling_factor":1.0,
           "norm_topk_prob":true,"num_nextn_predict_layers":1,"hidden_act":"silu",
           "max_position_embeddings":131072,"rms_norm_eps":1e-5,"rope_theta":1000000,
           "tie_word_embeddings":false,"pad_token_id":151329,
           "eos_token_id":[151329,151336,151338]})",
  };
}

// glm4_moe_lite (modular_glm4_moe_lite.py): DeepseekV3Attention (MLA; q_a_layernorm eps 1e-6)
// with glm4_moe's MoE; the dense layers by mlp_layer_types (default: one dense layer first).
DecoderFamily Glm4MoeLite() {
  const DeepseekMoeSpec d{.experts = 64, .top_k = 4, .inter = 1536, .shared = 1, .scaling = 1.8,
                      .n_group = 1, .topk_group = 1, .norm_topk = true, .dense_field = "",
                      .dense = 1, .layer_types_field = true};
  return {
      .model_type = "glm4_moe_lite",
      // head_dim: MLA's width is not hidden / heads (2048 / 20); ReadMla sets the rope width.
      .defaults = {.max_pos = 202752, .eps = 1e-5, .head_dim = 64},
      .llama_biases = false,
      .classic = true,
      .parse = MlaParse({.q_lora = 768, .kv_lora = 512, .nope = 192, .rope = 64, .v = 256,
                         .ln_eps = 1e-6},
                        /*reads_interleave=*/true, /*reads_mlp_bias=*/false),
      .parse_layers = DeepseekMoeParse(d),
      .scale_extra = DeepseekMoeScale(d),
      .aliases = {{"num_local_experts", "n_routed_experts"}},
      .classes = {"Glm4MoeLiteForCausalLM", "", "", "", "Glm4MoeLiteModel"},
      // Glm4MoeLiteConfig's defaults (zai-org/GLM-4.7-Flash)
      .example = R"({"model_type":"glm4_moe_lite","vocab_size":154880,"hidden_size":2048,
           "intermediate_size":10240,"moe_intermediate_size":1536,"num_hidden_layers":47,
           "num_attention_heads":20,"num_key_value_heads":20,"n_shared_experts":1,
           "n_routed_experts":64,"num_experts_per_tok":4,"routed_scaling_factor":1.8,
           "n_group":1,"topk_group":1,"norm_topk_prob":true,"q_lora_rank":768,
           "kv_lora_rank":512,"qk_nope_head_dim":192,"qk_rope_head_dim":64,"v_head_dim":256,
           "rope_interleave":true,"attention_bias":false,"hidden_act":"silu",
           "max_position_embeddings":202752,"rms_norm_eps":1e-5,"rope_theta":1000000,
           "tie_word_embeddings":false,"bos_token_id":0,"eos_token_id":1})",
  };
}

// dots1 (modular_dots1.py): Qwen3Attention (per-head q/k RMSNorm before the rotary,
// attention_bias on q / k / v / o) with DeepSeek-V3's MoE (norm_topk_prob false,
// first_k_dense_replace 0; the expert counts have no default); layers from max_window_layers
// slide whenever sliding_window is set (use_sliding_window is not read).
DecoderFamily Dots1() {
  const DeepseekMoeSpec d{.experts = -1, .top_k = -1, .inter = 1408, .shared = -1, .scaling = 1.0,
                      .n_group = 1, .topk_group = 1, .norm_topk = false, .dense = 0};
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

// solar_open (modular_solar_open.py): llama attention with q/k/v bias from attention_bias
// (o_proj never), full rotary on rope_theta 1e6; every layer DeepSeek-V3 MoE (no dense layer,
// no intermediate_size).
DecoderFamily SolarOpen() {
  const DeepseekMoeSpec d{.experts = 128, .top_k = 8, .inter = 1280, .shared = 1, .scaling = 1.0,
                      .n_group = 1, .topk_group = 1, .norm_topk = true, .dense_field = "",
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

// exaone_moe (modular_exaone_moe.py): OlmoeDecoderLayer's pre-norm blocks with EXAONE-4's
// attention (bias-free, per-head q/k RMSNorm before the rotary; with a sliding window the
// rotary runs on the sliding layers only, the full ones are NoPE) and DeepSeek-V3's MoE
// (num_experts / num_shared_experts; first_k_dense_replace 1 unless mlp_layer_types).
DecoderFamily ExaoneMoe() {
  const DeepseekMoeSpec d{.experts_field = "num_experts", .shared_field = "num_shared_experts",
                      .experts = 64, .top_k = 8, .inter = 1024, .shared = 1, .scaling = 2.5,
                      .n_group = 1, .topk_group = 1, .norm_topk = true,
                      .dense_field = "first_k_dense_replace", .dense = 1,
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
      .scale_extra = [d](const json& real, const Recipe& rc, json& t) {
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

// minimax_m2 (modular_minimax_m2.py): Mixtral's blocks, every layer MoE of intermediate_size
// wide experts and no shared expert, with FlexOlmoAttention's whole-projection q/k RMSNorm and
// a partial rotary (partial_rotary_factor, top level or in the RoPE parameters; the hub's
// rotary_dim is not read); MiniMaxM2TopKRouter: sigmoid, + mlp.e_score_correction_bias for the
// choice, top-k, renormalised (DeepSeek-V3's with one group and no scaling).
DecoderFamily MiniMaxM2() {
  const DeepseekMoeSpec d{.experts_field = "num_local_experts", .shared_field = "", .experts = 256,
                      .top_k = 8, .shared = 0, .inter_field = "", .scaling = 1.0, .n_group = 1,
                      .topk_group = 1, .norm_topk = true, .dense_field = "", .dense = 0};
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
        TS_RETURN_IF_ERROR(RotaryWithTheta(ConfigReader(rc), rc, 5000000.0,
                                           "partial_rotary_factor", 1.0, c));
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

// ernie4_5_moe (modular_ernie4_5_moe.py): ernie4_5's attention (interleaved rotary over the whole
// head, rope_theta 5e5; use_bias true is refused) with MoE layers where (i + 1) %
// moe_layer_interval == 0 and moe_layer_start_index <= i <= moe_layer_end_index (-1: the last):
// Ernie4_5_MoeTopKRouter (softmax; + mlp.gate.moe_statics.e_score_correction_bias [1, E] for the
// choice; the unbiased probabilities over max(their sum, moe_norm_min)), fused experts of
// moe_intermediate_size and moe_num_shared_experts ungated shared experts.
DecoderFamily Ernie45Moe() {
  return {
      .model_type = "ernie4_5_moe",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 131072, .eps = 1e-5, .tie = true},
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(RotaryWithTheta(r, config, 500000.0, "", 1.0, c));
        c.interleaved = true;
        TS_ASSIGN_OR_RETURN(bool bias, r.Bool("use_bias", false));
        if (bias) return r.Error("use_bias", "true is not supported by the zoo");
        return OkStatus();
      },
      .parse_layers = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        Moe& m = c.moe;
        m.router = Router::kErnie;
        m.deepseek_shared = true;
        m.score_bias_name = "gate.moe_statics.e_score_correction_bias";
        m.score_bias_row = true;
        TS_ASSIGN_OR_RETURN(m.experts, r.Int("moe_num_experts", 64));
        TS_RETURN_IF_ERROR(Positive(r, "moe_num_experts", m.experts));
        TS_ASSIGN_OR_RETURN(m.top_k, r.Int("moe_k", 6));
        TS_ASSIGN_OR_RETURN(m.inter, r.Int("moe_intermediate_size", 1536));
        TS_RETURN_IF_ERROR(Positive(r, "moe_intermediate_size", m.inter));
        TS_ASSIGN_OR_RETURN(int64_t shared, r.Int("moe_num_shared_experts", 2));
        if (shared < 0) return r.Error("moe_num_shared_experts", "must not be negative");
        m.shared_inter = shared * m.inter;
        TS_ASSIGN_OR_RETURN(m.norm_min, r.Double("moe_norm_min", 1e-12));
        TS_ASSIGN_OR_RETURN(int64_t start, r.Int("moe_layer_start_index", 1));
        TS_ASSIGN_OR_RETURN(int64_t end, r.Int("moe_layer_end_index", -1));
        if (end < 0) end = c.layers - 1;
        TS_ASSIGN_OR_RETURN(int64_t every, r.Int("moe_layer_interval", 1));
        TS_RETURN_IF_ERROR(Positive(r, "moe_layer_interval", every));
        m.sparse.clear();
        bool any_dense = false, any_sparse = false;
        for (int64_t i = 0; i < c.layers; ++i) {
          const bool sparse = (i + 1) % every == 0 && i >= start && i <= end;
          m.sparse.push_back(sparse);
          (sparse ? any_sparse : any_dense) = true;
        }
        m.pattern = any_dense && any_sparse;
        return CheckExperts(r, c);
      },
      .scale_extra = [](const json& real, const Recipe& rc, json& t) {
        ScaleExperts(rc, "moe_num_experts", t);
        t["moe_k"] = t["num_experts_per_tok"];
        t.erase("num_experts_per_tok");
        const int64_t hidden = t["hidden_size"].get<int64_t>();
        t["moe_intermediate_size"] = ScaleRatio(rc.moe.inter, rc.hidden, hidden, 8);
        const int64_t layers = t["num_hidden_layers"].get<int64_t>();
        const int64_t start = real.value("moe_layer_start_index", int64_t{1});
        t["moe_layer_start_index"] = std::min<int64_t>(start, layers - 1);
        t["moe_layer_end_index"] = -1;
        t["moe_layer_interval"] = 1;
      },
      .aliases = {{"num_experts", "moe_num_experts"}, {"num_experts_per_tok", "moe_k"}},
      .classes = {"Ernie4_5_MoeForCausalLM", "", "", "", "Ernie4_5_MoeModel"},
      // baidu/ERNIE-4.5-21B-A3B-PT
      .example = R"({"model_type":"ernie4_5_moe","vocab_size":103424,"hidden_size":2560,
           "intermediate_size":12288,"moe_intermediate_size":1536,"num_hidden_layers":28,
           "num_attention_heads":20,"num_key_value_heads":4,"head_dim":128,
           "moe_num_experts":64,"moe_k":6,"moe_num_shared_experts":2,
           "moe_layer_start_index":1,"moe_layer_end_index":27,"moe_layer_interval":1,
           "moe_use_aux_free":true,"hidden_act":"silu","max_position_embeddings":131072,
           "rms_norm_eps":1e-5,"rope_theta":500000,"use_bias":false,
           "tie_word_embeddings":true,"pad_token_id":0,"bos_token_id":1,"eos_token_id":2})",
  };
}

// youtu (modular_youtu.py): dense llama blocks (gated SiLU MLP) with DeepseekV3Attention (MLA,
// q_a / kv_a layernorms at eps 1e-6), tied embeddings.
DecoderFamily Youtu() {
  return {
      .model_type = "youtu",
      .defaults = {.max_pos = 131072, .eps = 1e-6, .tie = true},
      .llama_biases = false,
      .classic = true,
      .parse = MlaParse({.q_lora = 1536, .kv_lora = 512, .nope = 128, .rope = 64, .v = 128,
                         .ln_eps = 1e-6},
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

}  // namespace ts::zoo::internal::decoder
