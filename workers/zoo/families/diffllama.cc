// diffllama: llama layout (modular_diffllama.py: LlamaModel's layers, MistralMLP) with
// DiffLlamaAttention's differential attention (Recipe::diff_attn: the lambda_q1 / k1 / q2 / k2
// parameters per layer, head pairs' values side by side, a1 - lambda * a2, a weight-free RMSNorm
// over 2 * head_dim times 1 - lambda_init). Its heads pair up, so num_attention_heads is even.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily DiffLlama() {
  return {
      .model_type = "diffllama",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.eps = 1e-5},
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        // DiffLlamaConfig: attention_bias on q/k/v/o; MistralMLP has no bias.
        TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", false));
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = ab;
        if (c.heads % 2 != 0) {
          return r.Error("num_attention_heads",
                         "must be even (differential attention pairs the heads), got " +
                             std::to_string(c.heads));
        }
        c.diff_attn = true;
        return OkStatus();
      },
      .classes = {"DiffLlamaForCausalLM",
                  "DiffLlamaForSequenceClassification",
                  "DiffLlamaForTokenClassification",
                  "DiffLlamaForQuestionAnswering",
                  "DiffLlamaModel"},
      .qa_base = "transformer.",
      // DiffLlamaConfig's defaults (the config class's documented diffllama shape)
      .example = R"({"hidden_size":2048,"intermediate_size":8192,"num_attention_heads":32,"num_key_value_heads":32,
         "num_hidden_layers":16,"vocab_size":32000,"max_position_embeddings":2048,
         "rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu","attention_bias":false,
         "lambda_std_dev":0.1,"tie_word_embeddings":false,"bos_token_id":1,"eos_token_id":2,
         "initializer_range":0.02})",
  };
}

TS_ZOO_DECODER_FAMILY(DiffLlama);

}  // namespace ts::zoo::internal::decoder
