// mixtral: sparse MoE on every layer (transformers 5: `mlp.gate`, fused `mlp.experts.*`),
// renormalised top-k, sliding window.
#include <algorithm>
#include <string>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

// MoE: 4 experts; top_k at most half of them so that routing still selects.
void ScaleExperts(const Recipe& rc, const std::string& experts_field, json& t) {
  const int64_t experts = std::min<int64_t>(rc.moe.experts, 4);
  const int64_t top_k =
      std::max<int64_t>(1, std::min(rc.moe.top_k, std::max<int64_t>(1, experts / 2)));
  t[experts_field] = experts;
  t["num_experts_per_tok"] = top_k;
}

DecoderFamily Mixtral() {
  return {
      .model_type = "mixtral",
      .defaults = {.eps = 1e-5},
      .llama_biases = false,
      .classic = true,
      .windows = WindowPattern::kAll,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        json rc = config;
        if (!r.Has("rope_theta")) rc["rope_theta"] = 1e6;
        return ReadClassicRotary(r, rc, "", 1.0, false, c);
      },
      .parse_layers = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(c.moe.experts, r.Int("num_local_experts", 8));
        TS_RETURN_IF_ERROR(Positive(r, "num_local_experts", c.moe.experts));
        TS_ASSIGN_OR_RETURN(c.moe.top_k, r.Int("num_experts_per_tok", 2));
        c.moe.inter = c.inter;
        c.moe.norm_topk = true;
        c.moe.mixtral = true;
        c.moe.sparse.assign(static_cast<size_t>(c.layers), true);
        return CheckExperts(r, c);
      },
      .scale_extra = [](const json&, const Recipe& rc, json& t) {
        ScaleExperts(rc, "num_local_experts", t);
      },
      .classes = {"MixtralForCausalLM",
                  "MixtralForSequenceClassification",
                  "MixtralForTokenClassification",
                  "MixtralForQuestionAnswering",
                  "MixtralModel"},
      // mistralai/Mixtral-8x7B-v0.1
      .example = R"({"model_type":"mixtral","hidden_size":4096,"intermediate_size":14336,
           "num_attention_heads":32,"num_key_value_heads":8,"num_hidden_layers":32,
           "vocab_size":32000,"max_position_embeddings":32768,"rms_norm_eps":1e-5,
           "rope_theta":1000000.0,"hidden_act":"silu","num_local_experts":8,
           "num_experts_per_tok":2,"sliding_window":null,"tie_word_embeddings":false,
           "bos_token_id":1,"eos_token_id":2})",
  };
}

TS_ZOO_DECODER_FAMILY(Mixtral);

}  // namespace ts::zoo::internal::decoder
