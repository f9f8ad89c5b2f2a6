// seed_oss: llama layout; q/k/v bias without `attention_out_bias`.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily SeedOss() {
  return {
      .model_type = "seed_oss",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 524288},
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(c.o_bias, r.Bool("attention_out_bias", false));
        return OkStatus();
      },
      .classes = {"SeedOssForCausalLM",
                  "SeedOssForSequenceClassification",
                  "SeedOssForTokenClassification",
                  "SeedOssForQuestionAnswering",
                  "SeedOssModel"},
      .qa_base = "transformer.",
      // ByteDance-Seed/Seed-OSS-36B-Base
      .example = R"({"hidden_size":5120,"intermediate_size":27648,"num_attention_heads":80,"num_key_value_heads":8,
         "head_dim":128,"num_hidden_layers":64,"vocab_size":155136,"max_position_embeddings":524288,
         "rms_norm_eps":1e-6,"rope_theta":10000000.0,"hidden_act":"silu","attention_bias":true,
         "attention_out_bias":false,"mlp_bias":false,"tie_word_embeddings":false,"pad_token_id":1,
         "bos_token_id":0,"eos_token_id":2})",
  };
}

TS_ZOO_DECODER_FAMILY(SeedOss);

}  // namespace ts::zoo::internal::decoder
