// mistral: llama with a sliding window on every layer.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Mistral() {
  return {
      .model_type = "mistral",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.eps = 1e-6},
      .llama_biases = false,
      .classic = true,
      .windows = WindowPattern::kAll,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        return ReadClassicRotary(r, config, "", 1.0, false, c);
      },
      .classes = {"",
                  "",
                  "MistralForTokenClassification",
                  "MistralForQuestionAnswering",
                  "MistralModel"},
      // mistralai/Mistral-7B-v0.1
      .example = R"({"model_type":"mistral","hidden_size":4096,"intermediate_size":14336,
           "num_attention_heads":32,"num_key_value_heads":8,"num_hidden_layers":32,
           "vocab_size":32000,"max_position_embeddings":32768,"rms_norm_eps":1e-5,
           "rope_theta":10000.0,"sliding_window":4096,"hidden_act":"silu",
           "tie_word_embeddings":false,"bos_token_id":1,"eos_token_id":2})",
  };
}

// MistralForCausalLM and MistralForSequenceClassification: config.cc's ParseDecoderConfig and
// scaling.cc's ScaleToTiny, as these two heads always had.
DecoderFamily MistralLm() {
  return {
      .model_type = "mistral",
      .classes = {"MistralForCausalLM", "MistralForSequenceClassification", "", "", ""},
      // mistralai/Mistral-7B-v0.1
      .example = R"({"model_type":"mistral","hidden_size":4096,"intermediate_size":14336,
         "num_attention_heads":32,"num_key_value_heads":8,"num_hidden_layers":32,"vocab_size":32000,
         "max_position_embeddings":32768,"rms_norm_eps":1e-5,"rope_theta":10000.0,
         "sliding_window":4096,"hidden_act":"silu"})",
      .recipe = [](const json& config) { return RecipeFromDecoderConfig(config, "mistral"); },
      .scale = [](const json& config) { return ScaleToTiny(config, "mistral"); },
  };
}

TS_ZOO_DECODER_FAMILY(Mistral);
TS_ZOO_DECODER_FAMILY(MistralLm);

}  // namespace ts::zoo::internal::decoder
