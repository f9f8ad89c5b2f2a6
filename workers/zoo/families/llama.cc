// llama: RMSNorm, RoPE (+rope_scaling), GQA, SwiGLU, `attention_bias`.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Llama() {
  return {
      .model_type = "llama",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.eps = 1e-6},
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(ReadClassicRotary(r, config, "", 1.0, false, c));
        TS_RETURN_IF_ERROR(ReadAttentionBias(r, c));
        TS_ASSIGN_OR_RETURN(bool mb, r.Bool("mlp_bias", false));
        if (mb) return r.Error("mlp_bias", "true is not supported by the zoo");
        return OkStatus();
      },
      .classes = {"", "", "LlamaForTokenClassification", "LlamaForQuestionAnswering", "LlamaModel"},
      .qa_base = "transformer.",
      // meta-llama/Llama-2-7b-hf
      .example = R"({"model_type":"llama","hidden_size":4096,"intermediate_size":11008,
           "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
           "vocab_size":32000,"max_position_embeddings":4096,"rms_norm_eps":1e-5,
           "rope_theta":10000.0,"hidden_act":"silu","attention_bias":false,
           "tie_word_embeddings":false,"bos_token_id":1,"eos_token_id":2})",
  };
}

// LlamaForCausalLM and LlamaForSequenceClassification: config.cc's ParseDecoderConfig and
// scaling.cc's ScaleToTiny, as these two heads always had.
DecoderFamily LlamaLm() {
  return {
      .model_type = "llama",
      .classes = {"LlamaForCausalLM", "LlamaForSequenceClassification", "", "", ""},
      // meta-llama/Llama-2-7b-hf
      .example = R"({"model_type":"llama","hidden_size":4096,"intermediate_size":11008,
         "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,"vocab_size":32000,
         "max_position_embeddings":4096,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu",
         "tie_word_embeddings":false})",
      .recipe = [](const json& config) { return RecipeFromDecoderConfig(config, "llama"); },
      .scale = [](const json& config) { return ScaleToTiny(config, "llama"); },
  };
}

TS_ZOO_DECODER_FAMILY(Llama);
TS_ZOO_DECODER_FAMILY(LlamaLm);

}  // namespace ts::zoo::internal::decoder
