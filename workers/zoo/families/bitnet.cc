// bitnet: llama layout (modular_bitnet.py) with two RMSNorms inside the blocks: attn_sub_norm on
// the attention output before o_proj (BitNetAttention) and ffn_sub_norm on act(gate) * up before
// down_proj (BitNetMLP, GemmaMLP's bias-free gated MLP), hidden_act relu2 by default. The
// checkpoints' ternary weights are a quantization_config of the loader, not of the class: the
// class is built over ordinary Linear weights, as transformers builds it from the config alone.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily BitNet() {
  Names n;
  n.attn_sub = "attn_sub_norm";
  n.ffn_sub = "ffn_sub_norm";
  return {
      .model_type = "bitnet",
      .defaults = {.act = "relu2", .eps = 1e-5, .theta = 500000.0, .kv = 5},
      .names = n,
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        // BitNetConfig has attention_bias (LlamaAttention's q/k/v/o); GemmaMLP has no bias.
        TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", false));
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = ab;
        return OkStatus();
      },
      .classes = {"BitNetForCausalLM", "", "", "", "BitNetModel"},
      // microsoft/bitnet-b1.58-2B-4T-bf16 (its quantization_config left to the loader)
      .example =
          R"({"hidden_size":2560,"intermediate_size":6912,"num_attention_heads":20,"num_key_value_heads":5,
         "num_hidden_layers":30,"vocab_size":128256,"max_position_embeddings":4096,
         "rms_norm_eps":1e-5,"rope_theta":500000.0,"hidden_act":"relu2","attention_bias":false,
         "tie_word_embeddings":true,"bos_token_id":128000,"eos_token_id":128001,
         "initializer_range":0.02})",
  };
}

TS_ZOO_DECODER_FAMILY(BitNet);

}  // namespace ts::zoo::internal::decoder
