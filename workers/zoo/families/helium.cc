// helium: llama layout with GLM-style interleaved rotary (modular_helium.py apply_rotary_pos_emb:
// cos[..., :d/2].repeat_interleave(2), rotate_half over the even/odd pairs) and a bias-free
// o_proj whatever attention_bias says (HeliumAttention).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Helium() {
  return {
      .model_type = "helium",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 4096, .eps = 1e-8, .theta = 100000.0, .head_dim = 128},
      .parse = [](const ConfigReader&, const json&, Recipe& c) -> Status {
        c.interleaved = true;
        c.o_bias = false;
        return OkStatus();
      },
      .classes = {"HeliumForCausalLM",
                  "HeliumForSequenceClassification",
                  "HeliumForTokenClassification",
                  "",
                  "HeliumModel"},
      // kyutai/helium-1-preview-2b
      .example = R"({"hidden_size":2560,"intermediate_size":7040,"num_attention_heads":20,"num_key_value_heads":20,
         "head_dim":128,"num_hidden_layers":24,"vocab_size":48000,"max_position_embeddings":4096,
         "rms_norm_eps":1e-8,"rope_theta":100000.0,"hidden_act":"silu","attention_bias":false,
         "mlp_bias":false,"tie_word_embeddings":false,"pad_token_id":3,"bos_token_id":1,"eos_token_id":2})",
  };
}

TS_ZOO_DECODER_FAMILY(Helium);

}  // namespace ts::zoo::internal::decoder
