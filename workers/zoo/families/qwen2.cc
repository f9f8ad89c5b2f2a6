// qwen2: llama with q/k/v bias and Qwen sliding layers.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

Status ReadQwen2Attention(const ConfigReader& r, const json& config, Recipe& c) {
  TS_RETURN_IF_ERROR(ReadClassicRotary(r, config, "", 1.0, false, c));
  c.q_bias = c.k_bias = c.v_bias = true;
  return OkStatus();
}

DecoderFamily Qwen2() {
  return {
      .model_type = "qwen2",
      .defaults = {.eps = 1e-6},
      .llama_biases = false,
      .classic = true,
      .windows = WindowPattern::kQwen,
      .parse = ReadQwen2Attention,
      .classes = {"", "", "Qwen2ForTokenClassification", "Qwen2ForQuestionAnswering", "Qwen2Model"},
      .qa_base = "transformer.",
      // Qwen/Qwen2-7B
      .example = R"({"model_type":"qwen2","hidden_size":3584,"intermediate_size":18944,
           "num_attention_heads":28,"num_key_value_heads":4,"num_hidden_layers":28,
           "vocab_size":152064,"max_position_embeddings":32768,"rms_norm_eps":1e-6,
           "rope_theta":1000000.0,"use_sliding_window":false,"sliding_window":131072,
           "max_window_layers":28,"hidden_act":"silu","tie_word_embeddings":false,
           "bos_token_id":151643,"eos_token_id":151643})",
  };
}

// Qwen2ForCausalLM and Qwen2ForSequenceClassification: config.cc's ParseDecoderConfig and
// scaling.cc's ScaleToTiny, as these two heads always had.
DecoderFamily Qwen2Lm() {
  return {
      .model_type = "qwen2",
      .classes = {"Qwen2ForCausalLM", "Qwen2ForSequenceClassification", "", "", ""},
      // Qwen/Qwen2-7B
      .example = R"({"model_type":"qwen2","hidden_size":3584,"intermediate_size":18944,
         "num_attention_heads":28,"num_key_value_heads":4,"num_hidden_layers":28,"vocab_size":152064,
         "max_position_embeddings":32768,"rms_norm_eps":1e-6,"rope_theta":1000000.0,
         "use_sliding_window":false,"sliding_window":131072,"hidden_act":"silu",
         "tie_word_embeddings":false})",
      .recipe = [](const json& config) { return RecipeFromDecoderConfig(config, "qwen2"); },
      .scale = [](const json& config) { return ScaleToTiny(config, "qwen2"); },
  };
}

TS_ZOO_DECODER_FAMILY(Qwen2);
TS_ZOO_DECODER_FAMILY(Qwen2Lm);

}  // namespace ts::zoo::internal::decoder
