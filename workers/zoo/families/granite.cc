// granite: embedding / attention / residual multipliers, logits / `logits_scaling`.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Granite() {
  return {
      .model_type = "granite",
      .defaults = {.tie = true},
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(c.embed_scale, r.Double("embedding_multiplier", 1.0));
        TS_ASSIGN_OR_RETURN(c.residual_mult, r.Double("residual_multiplier", 1.0));
        TS_ASSIGN_OR_RETURN(c.attn_scale, r.Double("attention_multiplier", 1.0));
        TS_ASSIGN_OR_RETURN(double ls, r.Double("logits_scaling", 1.0));
        if (!(ls > 0)) return r.Error("logits_scaling", "must be positive");
        if (!(c.attn_scale > 0)) return r.Error("attention_multiplier", "must be positive");
        c.logit_mult = 1.0 / ls;
        return OkStatus();
      },
      .scale_extra = [](const json& real, const Recipe&, json& t) {
        // attention_multiplier is 1/head_dim in the checkpoints: keep that relation.
        const double real_hd = static_cast<double>(real["hidden_size"].get<int64_t>()) /
                               static_cast<double>(real["num_attention_heads"].get<int64_t>());
        const double tiny_hd = static_cast<double>(t["hidden_size"].get<int64_t>()) /
                               static_cast<double>(t["num_attention_heads"].get<int64_t>());
        t["attention_multiplier"] = real.value("attention_multiplier", 1.0) * real_hd / tiny_hd;
      },
      .classes = {"GraniteForCausalLM", "", "", "", "GraniteModel"},
      // ibm-granite/granite-3.0-2b-base
      .example = R"({"hidden_size":2048,"intermediate_size":8192,"num_attention_heads":32,"num_key_value_heads":8,
         "num_hidden_layers":40,"vocab_size":49155,"max_position_embeddings":4096,"rms_norm_eps":1e-5,
         "rope_theta":10000.0,"hidden_act":"silu","embedding_multiplier":12.0,
         "attention_multiplier":0.015625,"residual_multiplier":0.22,"logits_scaling":8.0,
         "attention_bias":false,"mlp_bias":false,"tie_word_embeddings":true,"pad_token_id":0,
         "bos_token_id":0,"eos_token_id":0})",
  };
}

TS_ZOO_DECODER_FAMILY(Granite);

}  // namespace ts::zoo::internal::decoder
