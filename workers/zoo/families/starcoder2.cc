// starcoder2: LayerNorm, GQA (2 kv heads by default), plain biased MLP `c_fc` / `c_proj`, sliding
// window.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Starcoder2() {
  return {
      .model_type = "starcoder2",
      .fields = {.eps = "norm_epsilon"},
      .defaults = {.act = "gelu_pytorch_tanh", .eps = 1e-5, .tie = true, .kv = 2},
      .names = {.up = "c_fc", .down = "c_proj"},
      .llama_biases = false,
      .classic = true,
      .windows = WindowPattern::kAll,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(ReadClassicRotary(r, config, "", 1.0, false, c));
        TS_ASSIGN_OR_RETURN(c.q_bias, r.Bool("use_bias", true));
        c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = c.q_bias;
        c.norm = Norm::kLayerNorm;
        c.mlp = Mlp::kPlain;
        return OkStatus();
      },
      .classes = {"Starcoder2ForCausalLM",
                  "Starcoder2ForSequenceClassification",
                  "Starcoder2ForTokenClassification",
                  "",
                  "Starcoder2Model"},
      // bigcode/starcoder2-3b
      .example = R"({"model_type":"starcoder2","hidden_size":3072,"intermediate_size":12288,
           "num_attention_heads":24,"num_key_value_heads":2,"num_hidden_layers":30,
           "vocab_size":49152,"max_position_embeddings":16384,"norm_epsilon":1e-5,
           "rope_theta":999999.4420358813,"hidden_act":"gelu_pytorch_tanh","use_bias":true,
           "sliding_window":4096,"tie_word_embeddings":true,"bos_token_id":0,
           "eos_token_id":0})",
  };
}

TS_ZOO_DECODER_FAMILY(Starcoder2);

}  // namespace ts::zoo::internal::decoder
