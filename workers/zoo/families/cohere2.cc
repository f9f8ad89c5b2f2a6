// cohere2: cohere with sliding layers with rotary and NoPE full layers.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Cohere2() {
  return {
      .model_type = "cohere2",
      .fields = {.eps = "layer_norm_eps"},
      .defaults = {.max_pos = 8192, .eps = 1e-5, .tie = true},
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(CohereLayers(r, config, c));
        // Cohere2: sliding layers use rotary; full layers are NoPE.
        return SlidingWithPattern(r, config, /*pattern_default=*/4, /*rope_local=*/false, c);
      },
      .scale_extra = [](const json& real, const Recipe& rc, json& t) {
        ScaleSlidingPattern(rc.rope_on, real, rc, t);
      },
      .classes = {"Cohere2ForCausalLM", "", "", "", "Cohere2Model"},
      // CohereForAI/c4ai-command-r7b-12-2024
      .example = R"({"hidden_size":4096,"intermediate_size":14336,"num_attention_heads":32,"num_key_value_heads":8,
         "num_hidden_layers":32,"vocab_size":256000,"max_position_embeddings":8192,"layer_norm_eps":1e-5,
         "logit_scale":0.25,"rope_theta":50000.0,"sliding_window":4096,"sliding_window_pattern":4,
         "hidden_act":"silu","attention_bias":false,"tie_word_embeddings":true,"pad_token_id":0,
         "bos_token_id":5,"eos_token_id":255001})",
  };
}

TS_ZOO_DECODER_FAMILY(Cohere2);

}  // namespace ts::zoo::internal::decoder
