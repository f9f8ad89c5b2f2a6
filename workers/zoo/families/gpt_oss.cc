// gpt_oss (modular_gpt_oss.py): llama-style layers with biased q / k / v / o (attention_bias,
// default true), attention sinks (GptOssAttention.sinks: one learned logit per head joins each
// query's softmax and is dropped; Recipe::attn_sinks), sliding_window on the sliding layers of
// layer_types (default: even layers slide), yarn rotary (with its `truncate`), and GptOssMLP on
// every layer: GptOssTopKRouter (`mlp.router.weight` / `bias`: top-k of the logits, softmax over
// them) over GptOssExperts (`gate_up_proj` [E, H, 2I] gate / up interleaved, `down_proj`
// [E, I, H], their biases; (up + 1) * gate * sigmoid(1.702 gate) clamped at swiglu_limit). The
// router's auxiliary loss (output_router_logits true) is refused naming the field.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily GptOss() {
  return {
      .model_type = "gpt_oss",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 131072, .eps = 1e-5, .theta = 150000.0, .head_dim = 64},
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", true));
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = ab;
        c.attn_sinks = true;
        TS_ASSIGN_OR_RETURN(bool router_logits, r.Bool("output_router_logits", false));
        if (router_logits) {
          return r.Error("output_router_logits",
                         "true (the router's auxiliary loss) is not supported by the zoo");
        }
        json windows = config;  // GptOssConfig's layer_types default: sliding on even layers
        if (!r.Has("layer_types")) windows["sliding_window_pattern"] = 2;
        if (!r.Has("sliding_window")) windows["sliding_window"] = 128;
        TS_RETURN_IF_ERROR(MistralWindow(ConfigReader(windows), windows, c));
        Moe& m = c.moe;
        TS_ASSIGN_OR_RETURN(m.experts, r.Int("num_local_experts", 128));
        TS_RETURN_IF_ERROR(Positive(r, "num_local_experts", m.experts));
        TS_ASSIGN_OR_RETURN(m.top_k, r.Int("num_experts_per_tok", 4));
        TS_RETURN_IF_ERROR(CheckExperts(r, c));
        TS_ASSIGN_OR_RETURN(m.swiglu_limit, r.Double("swiglu_limit", 7.0));
        if (!(m.swiglu_limit > 0)) return r.Error("swiglu_limit", "must be positive");
        m.inter = c.inter;
        m.router = Router::kTopKSoftmax;
        m.router_name = "router.weight";
        m.router_bias = true;
        m.gpt_oss_experts = true;
        m.sparse.assign(static_cast<size_t>(c.layers), true);
        return OkStatus();
      },
      .scale_extra =
          [](const json& real, const Recipe& rc, json& t) {
            json w = real;  // the windows as parsed (GptOssConfig's defaults made explicit)
            if (!w.contains("sliding_window")) w["sliding_window"] = 128;
            ScaleWindowPattern(w, rc, t);
            ScaleExperts(rc, "num_local_experts", t);
            t.erase("experts_per_token");
          },
      .classes = {"GptOssForCausalLM", "GptOssForSequenceClassification",
                  "GptOssForTokenClassification", "", "GptOssModel"},
      // openai/gpt-oss-20b
      .example =
          R"({"hidden_size":2880,"intermediate_size":2880,"num_attention_heads":64,"num_key_value_heads":8,
         "head_dim":64,"num_hidden_layers":24,"vocab_size":201088,"max_position_embeddings":131072,
         "rms_norm_eps":1e-5,"rope_theta":150000.0,"hidden_act":"silu","attention_bias":true,
         "rope_scaling":{"rope_type":"yarn","factor":32.0,"beta_fast":32.0,"beta_slow":1.0,
           "truncate":false,"original_max_position_embeddings":4096},
         "sliding_window":128,"layer_types":["sliding_attention","full_attention",
           "sliding_attention","full_attention","sliding_attention","full_attention",
           "sliding_attention","full_attention","sliding_attention","full_attention",
           "sliding_attention","full_attention","sliding_attention","full_attention",
           "sliding_attention","full_attention","sliding_attention","full_attention",
           "sliding_attention","full_attention","sliding_attention","full_attention",
           "sliding_attention","full_attention"],
         "num_local_experts":32,"num_experts_per_tok":4,"experts_per_token":4,"swiglu_limit":7.0,
         "router_aux_loss_coef":0.9,"output_router_logits":false,"tie_word_embeddings":false,
         "pad_token_id":199999,"eos_token_id":200002,"initializer_range":0.02})",
  };
}

TS_ZOO_DECODER_FAMILY(GptOss);

}  // namespace ts::zoo::internal::decoder
