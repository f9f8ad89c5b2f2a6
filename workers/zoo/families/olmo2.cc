// olmo2: post-norm block (norms after attention and MLP, none before), q/k RMSNorm over the whole
// projection.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

Status ReadOlmo2Attention(const ConfigReader& r, const json& config, Recipe& c) {
  TS_RETURN_IF_ERROR(ReadClassicRotary(r, config, "", 1.0, false, c));
  TS_RETURN_IF_ERROR(ReadAttentionBias(r, c));
  c.qk_norm = QkNorm::kFullRms;
  return OkStatus();
}

DecoderFamily Olmo2() {
  return {
      .model_type = "olmo2",
      .defaults = {.eps = 1e-5},
      .names = {.ln1 = "",
                .ln2 = "",
                .post1 = "post_attention_layernorm",
                .post2 = "post_feedforward_layernorm"},
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(ReadOlmo2Attention(r, config, c));
        c.block = Block::kPost;
        return OkStatus();
      },
      .classes = {"Olmo2ForCausalLM", "", "", "", "Olmo2Model"},
      // allenai/OLMo-2-1124-7B
      .example = R"({"model_type":"olmo2","hidden_size":4096,"intermediate_size":11008,
           "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
           "vocab_size":100352,"max_position_embeddings":4096,"rms_norm_eps":1e-6,
           "rope_theta":500000,"hidden_act":"silu","attention_bias":false,
           "tie_word_embeddings":false,"pad_token_id":100277,"eos_token_id":100257})",
  };
}

TS_ZOO_DECODER_FAMILY(Olmo2);

}  // namespace ts::zoo::internal::decoder
