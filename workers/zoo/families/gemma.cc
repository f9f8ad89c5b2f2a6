// gemma: Gemma (1 + w) RMSNorm, sqrt(hidden) embedding scale, GeGLU. The activation is
// `hidden_act` (transformers 5 GemmaConfig, default "gelu_pytorch_tanh"; GemmaMLP is LlamaMLP,
// ACT2FN[config.hidden_act], so "gelu" is the exact erf GELU); `hidden_activation`, which the
// 4.38-era GemmaMLP preferred, is no longer read.
#include <cmath>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Gemma() {
  return {
      .model_type = "gemma",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.act = "gelu_pytorch_tanh", .eps = 1e-6, .tie = true},
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(ReadClassicRotary(r, config, "", 1.0, false, c));
        TS_RETURN_IF_ERROR(ReadAttentionBias(r, c));
        c.norm = Norm::kGemmaRms;
        c.embed_scale = std::sqrt(static_cast<double>(c.hidden));
        return OkStatus();
      },
      .classes = {"GemmaForCausalLM",
                  "GemmaForSequenceClassification",
                  "GemmaForTokenClassification",
                  "",
                  "GemmaModel"},
      // google/gemma-2b
      .example = R"({"model_type":"gemma","hidden_size":2048,"intermediate_size":16384,
           "num_attention_heads":8,"num_key_value_heads":1,"head_dim":256,
           "num_hidden_layers":18,"vocab_size":256000,"max_position_embeddings":8192,
           "rms_norm_eps":1e-6,"rope_theta":10000.0,"hidden_act":"gelu",
           "hidden_activation":"gelu_pytorch_tanh","pad_token_id":0,"bos_token_id":2,
           "eos_token_id":1,"attention_bias":false,"tie_word_embeddings":true})",
  };
}

TS_ZOO_DECODER_FAMILY(Gemma);

}  // namespace ts::zoo::internal::decoder
