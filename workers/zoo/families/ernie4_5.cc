// ernie4_5: interleaved rotary over the whole head, `use_bias`.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Ernie45() {
  return {
      .model_type = "ernie4_5",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 131072, .eps = 1e-5, .tie = true, .theta = 500000.0},
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        c.interleaved = true;  // GLM-style rotary over the whole head
        TS_ASSIGN_OR_RETURN(bool b, r.Bool("use_bias", false));
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = b;
        return OkStatus();
      },
      .classes = {"Ernie4_5ForCausalLM", "", "", "", "Ernie4_5Model"},
      // baidu/ERNIE-4.5-0.3B-PT
      .example = R"({"hidden_size":1024,"intermediate_size":3072,"num_attention_heads":16,"num_key_value_heads":2,
         "head_dim":128,"num_hidden_layers":18,"vocab_size":103424,"max_position_embeddings":131072,
         "rms_norm_eps":1e-5,"rope_theta":500000.0,"hidden_act":"silu","use_bias":false,
         "tie_word_embeddings":true,"pad_token_id":0,"bos_token_id":1,"eos_token_id":2})",
  };
}

TS_ZOO_DECODER_FAMILY(Ernie45);

}  // namespace ts::zoo::internal::decoder
