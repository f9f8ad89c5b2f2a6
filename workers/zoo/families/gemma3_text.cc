// gemma3_text: Gemma (1 + w) sandwich norms, q/k norms, `query_pre_attn_scalar`, sqrt(hidden)
// embedding scale, sliding layers on `rope_local_base_freq`, 5:1 pattern.
#include <algorithm>
#include <cmath>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Gemma3Text() {
  return {
      .model_type = "gemma3_text",
      .fields = {.head_dim = "head_dim", .act = "hidden_activation"},
      .defaults = {.max_pos = 131072,
                   .act = "gelu_pytorch_tanh",
                   .tie = true,
                   .theta = 1000000.0,
                   .head_dim = 256},
      .names = {.ln2 = "pre_feedforward_layernorm",
                .post1 = "post_attention_layernorm",
                .post2 = "post_feedforward_layernorm"},
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        c.norm = Norm::kGemmaRms;
        c.qk_norm = QkNorm::kPerHeadGemma;
        c.block = Block::kSandwich;
        c.embed_scale = std::sqrt(static_cast<double>(c.hidden));
        TS_ASSIGN_OR_RETURN(double qpas, r.Double("query_pre_attn_scalar", 256.0));
        if (!(qpas > 0)) return r.Error("query_pre_attn_scalar", "must be positive");
        c.attn_scale = 1.0 / std::sqrt(qpas);
        for (const char* cap : {"attn_logit_softcapping", "final_logit_softcapping"}) {
          if (r.Has(cap))
            return r.Error(cap, "soft-capping is not supported by the zoo (use gemma2)");
        }
        TS_ASSIGN_OR_RETURN(double local, r.Double("rope_local_base_freq", 10000.0));
        // transformers 5 (Gemma3TextConfig, RotaryEmbeddingConfigMixin.standardize_rope_params):
        // a `rope_parameters` nested by layer type gives the sliding layers its whole
        // `sliding_attention` entry (kind and factors; rope_theta defaulting to
        // rope_local_base_freq); a flat `rope_scaling` / `rope_parameters` is the full layers'
        // alone, and the sliding layers run default RoPE on rope_local_base_freq.
        const std::optional<RopeParamsRef> ref = FindRopeParams(config, "sliding_attention");
        if (ref && ref->sub == "sliding_attention") {
          json lc = config;
          lc["rope_theta"] = local;
          TS_ASSIGN_OR_RETURN(c.rope_local, ParseRope(lc, c.max_pos, "sliding_attention"));
        } else {
          c.rope_local = RopeConfig();
          c.rope_local.theta = local;
          c.rope_local.max_position_embeddings = c.max_pos;
          c.rope_local.original_max_position_embeddings = c.max_pos;
        }
        return SlidingWithPattern(r, config, /*pattern_default=*/6, /*rope_local=*/true, c);
      },
      .scale_extra = [](const json& real, const Recipe& rc, json& t) {
        t["query_pre_attn_scalar"] = std::max<int64_t>(
            1, std::llround(real.value("query_pre_attn_scalar", 256.0) *
                            static_cast<double>(t["head_dim"].get<int64_t>()) /
                            static_cast<double>(real.value("head_dim", int64_t{256}))));
        ScaleSlidingPattern(rc.rope_local_on, real, rc, t);
      },
      .classes = {"Gemma3ForCausalLM",
                  "Gemma3TextForSequenceClassification",
                  "",
                  "",
                  "Gemma3TextModel"},
      // google/gemma-3-1b-pt
      .example = R"({"hidden_size":1152,"intermediate_size":6912,"num_attention_heads":4,"num_key_value_heads":1,
         "head_dim":256,"num_hidden_layers":26,"vocab_size":262144,"max_position_embeddings":32768,
         "rms_norm_eps":1e-6,"rope_theta":1000000.0,"rope_local_base_freq":10000.0,"rope_scaling":null,
         "hidden_activation":"gelu_pytorch_tanh","query_pre_attn_scalar":256,"sliding_window":512,
         "sliding_window_pattern":6,"attn_logit_softcapping":null,"final_logit_softcapping":null,
         "attention_bias":false,"tie_word_embeddings":true,"pad_token_id":0,"bos_token_id":2,
         "eos_token_id":1})",
  };
}

TS_ZOO_DECODER_FAMILY(Gemma3Text);

}  // namespace ts::zoo::internal::decoder
