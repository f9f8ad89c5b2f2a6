// qwen3: per-head q/k RMSNorm, head_dim 128 by default, Qwen sliding layers.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

Status ReadQwen3Attention(const ConfigReader& r, const json& config, Recipe& c) {
  TS_RETURN_IF_ERROR(ReadClassicRotary(r, config, "", 1.0, false, c));
  TS_RETURN_IF_ERROR(ReadAttentionBias(r, c));
  c.qk_norm = QkNorm::kPerHeadRms;
  return OkStatus();
}

DecoderFamily Qwen3() {
  return {
      .model_type = "qwen3",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.eps = 1e-6, .head_dim = 128},
      .llama_biases = false,
      .classic = true,
      .windows = WindowPattern::kQwen,
      .parse = ReadQwen3Attention,
      .classes = {"Qwen3ForCausalLM",
                  "Qwen3ForSequenceClassification",
                  "Qwen3ForTokenClassification",
                  "Qwen3ForQuestionAnswering",
                  "Qwen3Model"},
      .qa_base = "transformer.",
      // Qwen/Qwen3-1.7B
      .example = R"({"model_type":"qwen3","hidden_size":2048,"intermediate_size":6144,
           "num_attention_heads":16,"num_key_value_heads":8,"head_dim":128,
           "num_hidden_layers":28,"vocab_size":151936,"max_position_embeddings":40960,
           "rms_norm_eps":1e-6,"rope_theta":1000000,"hidden_act":"silu",
           "tie_word_embeddings":true,"use_sliding_window":false,"sliding_window":null,
           "max_window_layers":28,"attention_bias":false,"bos_token_id":151643,
           "eos_token_id":151645})",
  };
}

TS_ZOO_DECODER_FAMILY(Qwen3);

}  // namespace ts::zoo::internal::decoder
