// nemotron: LayerNorm1P `(1 + w)`, ReLU^2 MLP, partial rotary 0.5.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Nemotron() {
  return {
      .model_type = "nemotron",
      .fields = {.head_dim = "head_dim", .eps = "norm_eps"},
      .defaults = {.max_pos = 4096, .act = "relu2", .eps = 1e-5},
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        c.norm = Norm::kLayerNorm1P;
        c.mlp = Mlp::kPlain;
        return ReadPartial(r, "partial_rotary_factor", 0.5, c);
      },
      .classes = {"NemotronForCausalLM",
                  "NemotronForSequenceClassification",
                  "NemotronForTokenClassification",
                  "NemotronForQuestionAnswering",
                  "NemotronModel"},
      .qa_base = "transformer.",
      // nvidia/Minitron-4B-Base
      .example = R"({"hidden_size":3072,"intermediate_size":9216,"num_attention_heads":24,"num_key_value_heads":8,
         "head_dim":128,"num_hidden_layers":32,"vocab_size":256000,"max_position_embeddings":4096,
         "norm_eps":1e-5,"rope_theta":10000,"partial_rotary_factor":0.5,"hidden_act":"relu2",
         "attention_bias":false,"mlp_bias":false,"tie_word_embeddings":false,"bos_token_id":2,
         "eos_token_id":3})",
  };
}

TS_ZOO_DECODER_FAMILY(Nemotron);

}  // namespace ts::zoo::internal::decoder
