// gemma2: gemma with sandwich norms, `query_pre_attn_scalar`, attention and final logit soft-
// capping, alternating sliding layers.
#include <algorithm>
#include <cmath>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Gemma2() {
  return {
      .model_type = "gemma2",
      .fields = {.head_dim = "head_dim", .act = "hidden_activation"},
      .defaults = {.act = "gelu_pytorch_tanh", .eps = 1e-6, .tie = true},
      .names = {.ln2 = "pre_feedforward_layernorm",
                .post1 = "post_attention_layernorm",
                .post2 = "post_feedforward_layernorm"},
      .llama_biases = false,
      .classic = true,
      .windows = WindowPattern::kAlternate,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(ReadClassicRotary(r, config, "", 1.0, false, c));
        TS_ASSIGN_OR_RETURN(double qpas, r.Double("query_pre_attn_scalar", 256.0));
        if (!(qpas > 0)) return r.Error("query_pre_attn_scalar", "must be positive");
        c.attn_scale = 1.0 / std::sqrt(qpas);
        if (!r.IsNull("attn_logit_softcapping")) {
          TS_ASSIGN_OR_RETURN(c.attn_softcap, r.Double("attn_logit_softcapping", 50.0));
        }
        if (!r.IsNull("final_logit_softcapping")) {
          TS_ASSIGN_OR_RETURN(c.final_softcap, r.Double("final_logit_softcapping", 30.0));
        }
        if (c.attn_softcap < 0) return r.Error("attn_logit_softcapping", "must be positive");
        if (c.final_softcap < 0) return r.Error("final_logit_softcapping", "must be positive");
        TS_RETURN_IF_ERROR(ReadAttentionBias(r, c));
        c.norm = Norm::kGemmaRms;
        c.embed_scale = std::sqrt(static_cast<double>(c.hidden));
        c.block = Block::kSandwich;
        c.sandwich_post_first = true;
        return OkStatus();
      },
      .scale_extra = [](const json& real, const Recipe& rc, json& t) {
        // query_pre_attn_scalar keeps its ratio to head_dim.
        t["query_pre_attn_scalar"] = std::max<int64_t>(
            1, std::llround(real.value("query_pre_attn_scalar", 256.0) *
                            static_cast<double>(t["head_dim"].get<int64_t>()) /
                            static_cast<double>(rc.head_dim)));
      },
      .classes = {"Gemma2ForCausalLM",
                  "Gemma2ForSequenceClassification",
                  "Gemma2ForTokenClassification",
                  "",
                  "Gemma2Model"},
      // google/gemma-2-2b
      .example = R"({"model_type":"gemma2","hidden_size":2304,"intermediate_size":9216,
           "num_attention_heads":8,"num_key_value_heads":4,"head_dim":256,
           "num_hidden_layers":26,"vocab_size":256000,"max_position_embeddings":8192,
           "rms_norm_eps":1e-6,"rope_theta":10000.0,"hidden_activation":"gelu_pytorch_tanh",
           "query_pre_attn_scalar":256,"sliding_window":4096,"attn_logit_softcapping":50.0,
           "final_logit_softcapping":30.0,"pad_token_id":0,"bos_token_id":2,"eos_token_id":1,
           "attention_bias":false})",
  };
}

TS_ZOO_DECODER_FAMILY(Gemma2);

}  // namespace ts::zoo::internal::decoder
