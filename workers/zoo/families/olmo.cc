// olmo: non-parametric LayerNorm (no weights), `clip_qkv`.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Olmo() {
  return {
      .model_type = "olmo",
      .defaults = {.eps = 1e-5},
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        c.norm = Norm::kNonParam;  // OlmoLayerNorm: no weight, no bias
        c.eps = 1e-5;
        if (r.Has("clip_qkv")) {
          TS_ASSIGN_OR_RETURN(c.clip_qkv, r.Double("clip_qkv"));
          if (!(c.clip_qkv > 0)) return r.Error("clip_qkv", "must be positive");
        }
        return OkStatus();
      },
      .classes = {"OlmoForCausalLM", "", "", "", "OlmoModel"},
      // allenai/OLMo-7B-0424-hf
      .example = R"({"hidden_size":4096,"intermediate_size":11008,"num_attention_heads":32,"num_key_value_heads":32,
         "num_hidden_layers":32,"vocab_size":50304,"max_position_embeddings":4096,"rope_theta":10000.0,
         "hidden_act":"silu","attention_bias":false,"clip_qkv":8.0,"tie_word_embeddings":false,
         "pad_token_id":1,"eos_token_id":50279})",
  };
}

TS_ZOO_DECODER_FAMILY(Olmo);

}  // namespace ts::zoo::internal::decoder
