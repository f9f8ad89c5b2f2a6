// arcee: llama layout with the non-gated ReLU^2 MLP down(relu(up x)^2).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Arcee() {
  return {
      .model_type = "arcee",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 4096, .act = "relu2", .eps = 1e-5},
      .parse = [](const ConfigReader&, const json&, Recipe& c) -> Status {
        c.mlp = Mlp::kPlain;  // ArceeMLP: down(act(up(x)))
        return OkStatus();
      },
      .classes = {"ArceeForCausalLM",
                  "ArceeForSequenceClassification",
                  "ArceeForTokenClassification",
                  "ArceeForQuestionAnswering",
                  "ArceeModel"},
      .qa_base = "transformer.",
      // arcee-ai/AFM-4.5B-Base
      .example = R"({"hidden_size":2560,"intermediate_size":18432,"num_attention_heads":20,"num_key_value_heads":4,
         "head_dim":128,"num_hidden_layers":36,"vocab_size":128004,"max_position_embeddings":65536,
         "rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"relu2",
         "rope_scaling":{"rope_type":"yarn","factor":20.0,"original_max_position_embeddings":4096,
           "beta_fast":32.0,"beta_slow":1.0},
         "attention_bias":false,"mlp_bias":false,"tie_word_embeddings":false,"pad_token_id":128004,
         "bos_token_id":128000,"eos_token_id":128001})",
  };
}

TS_ZOO_DECODER_FAMILY(Arcee);

}  // namespace ts::zoo::internal::decoder
